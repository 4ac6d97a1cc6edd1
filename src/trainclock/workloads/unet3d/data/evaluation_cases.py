"""The reference's fixed 42 KiTS19 evaluation cases (mlcommons/training image_segmentation/pytorch
evaluation_cases.txt), kept in code so an installed package needs no data file."""

EVALUATION_CASES: tuple[str, ...] = (
    "00000", "00003", "00005", "00006", "00012", "00024", "00034", "00041", "00044", "00049",
    "00052", "00056", "00061", "00065", "00066", "00070", "00076", "00078", "00080", "00084",
    "00086", "00087", "00092", "00111", "00112", "00125", "00128", "00138", "00157", "00160",
    "00161", "00162", "00169", "00171", "00176", "00185", "00187", "00189", "00198", "00203",
    "00206", "00207",
)
