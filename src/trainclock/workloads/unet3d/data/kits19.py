"""KiTS19 as published (case_XXXXX/imaging.nii.gz and segmentation.nii.gz) and the reference's
preprocessing (mlcommons/training image_segmentation/pytorch/preprocess_dataset.py): resample to
the target spacing (trilinear for the image, nearest for the label), clip the intensities to
[-79, 304] HU, normalise with mean 101 and std 76.9, pad (edge) to at least the patch shape, and
save case_XXXXX_x.npy (float32, 1xDxHxW) and case_XXXXX_y.npy (uint8, 1xDxHxW)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.nn.functional import interpolate

from trainclock.errors import DataError
from trainclock.storage import atomic_writer

MAX_ID = 210  # cases 210-299 of KiTS19 have no published labels: the reference skips them
MEAN_VAL = 101.0
STDDEV_VAL = 76.9
MIN_CLIP_VAL = -79.0
MAX_CLIP_VAL = 304.0
TARGET_SPACING = (1.6, 1.2, 1.2)


def nifti_cases(folder: Path) -> list[Path]:
    """The case folders of a KiTS19 tree, sorted, the unlabelled ones (id >= 210) left out."""
    cases = sorted(p for p in folder.glob("case_*") if p.is_dir())
    return [c for c in cases if _case_id(c.name) < MAX_ID]


def _case_id(name: str) -> int:
    try:
        return int(name.split("_")[1])
    except (IndexError, ValueError):
        raise DataError(f"{name}: not a KiTS19 case name (case_00042); rename it or remove it") from None


def load_pair(case: Path) -> tuple[np.ndarray, np.ndarray, tuple[float, float, float]]:
    """(image 1xDxHxW float32, label 1xDxHxW uint8, spacing in mm) of one NIfTI case."""
    import nibabel  # only the NIfTI path needs it

    paths = [case / "imaging.nii.gz", case / "segmentation.nii.gz"]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path} is missing; a KiTS19 case folder holds imaging.nii.gz and segmentation.nii.gz")
    try:
        image_file, label_file = (nibabel.load(str(p)) for p in paths)
        spacing = tuple(float(s) for s in image_file.header["pixdim"][1:4])
        image = np.asarray(image_file.get_fdata(), dtype=np.float32)
        label = np.asarray(label_file.get_fdata(), dtype=np.float32).astype(np.uint8)
    except Exception as e:  # nibabel raises many kinds (ImageFileError, EOFError, zlib.error, ...) for a bad file
        raise DataError(f"{case}: unreadable NIfTI ({type(e).__name__}: {e}); re-download the case") from None
    if image.shape != label.shape or image.ndim != 3:
        raise DataError(f"{case}: imaging {image.shape} and segmentation {label.shape} differ in shape; "
                        "re-download the case")
    return image[None], label[None], spacing  # type: ignore[return-value]


def resample(image: np.ndarray, label: np.ndarray, spacing: tuple[float, ...],
             target: tuple[float, ...] = TARGET_SPACING) -> tuple[np.ndarray, np.ndarray]:
    if tuple(spacing) == tuple(target):
        return image, label
    shape = (np.array(spacing) / np.array(target) * np.array(image.shape[1:])).astype(int).tolist()
    image = interpolate(torch.from_numpy(image[None]), size=shape, mode="trilinear", align_corners=True)[0].numpy()
    label = interpolate(torch.from_numpy(label[None]), size=shape, mode="nearest")[0].numpy()
    return image, label


def normalize(image: np.ndarray) -> np.ndarray:
    return (np.clip(image, MIN_CLIP_VAL, MAX_CLIP_VAL) - MEAN_VAL) / STDDEV_VAL


def pad_to(image: np.ndarray, label: np.ndarray, min_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    bounds = [max(0, m - s) for m, s in zip(min_shape, image.shape[1:])]
    paddings = [(0, 0)] + [(b // 2, b - b // 2) for b in bounds]
    return np.pad(image, paddings, mode="edge"), np.pad(label, paddings, mode="edge")


def preprocess_case(case: Path, out: Path, min_shape: tuple[int, ...]) -> None:
    image, label, spacing = load_pair(case)
    image, label = resample(image, label, spacing)
    image, label = pad_to(normalize(image), label, min_shape)
    save_pair(out, case.name, image.astype(np.float32), label.astype(np.uint8))


def save_pair(out: Path, case: str, image: np.ndarray, label: np.ndarray) -> None:
    for suffix, array in (("x", image), ("y", label)):
        with atomic_writer(out / f"{case}_{suffix}.npy", "wb") as f:
            np.save(f, array, allow_pickle=False)


def preprocess(folder: Path, out: Path, min_shape: tuple[int, ...]) -> int:
    """Every labelled case of a KiTS19 tree into .npy pairs in `out`; the number of cases."""
    cases = nifti_cases(folder)
    if not cases:
        raise DataError(f"no KiTS19 case folders (case_XXXXX/imaging.nii.gz) in {folder}; point --data at the "
                        "kits19/data folder or at the preprocessed .npy files")
    for case in cases:
        preprocess_case(case, out, min_shape)
    return len(cases)
