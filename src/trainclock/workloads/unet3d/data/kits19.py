"""KiTS19 as published (case_XXXXX/imaging.nii.gz and segmentation.nii.gz) and the reference's
preprocessing (mlcommons/training image_segmentation/pytorch/preprocess_dataset.py): resample to
the target spacing (trilinear for the image, nearest for the label), clip the intensities to
[-79, 304] HU, normalise with mean 101 and std 76.9, pad (edge) to at least the patch shape, and
save case_XXXXX_x.npy (float32, 1xDxHxW) and case_XXXXX_y.npy (uint8, 1xDxHxW)."""

from __future__ import annotations

import gzip
import struct
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
SPACING_RANGE = (0.1, 20.0)  # mm: KiTS19's voxels are 0.4-5 mm; outside this a pixdim is corrupt, not a scan
MAX_VOXELS = 2**30  # a case's volume, as read or resampled (KiTS19's largest: ~280M read, ~40M resampled)
LABELS = (0, 1, 2)  # background, kidney, tumour


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
    """(image 1xDxHxW float32, label 1xDxHxW uint8, spacing in mm) of one NIfTI case. The headers
    are checked before any voxel is read: 3-D volumes of equal shape, a sane spacing, a size that
    fits once resampled; then the labels: 0, 1 or 2 only."""
    import nibabel  # only the NIfTI path needs it

    paths = [case / "imaging.nii.gz", case / "segmentation.nii.gz"]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path} is missing; a KiTS19 case folder holds imaging.nii.gz and segmentation.nii.gz")
    try:
        image_file, label_file = (nibabel.load(str(p)) for p in paths)
        shapes = [tuple(int(n) for n in f.shape) for f in (image_file, label_file)]
        spacing = _stored_spacing(paths[0])
    except Exception as e:  # nibabel raises many kinds (ImageFileError, EOFError, zlib.error, ...) for a bad file
        raise _unreadable(case, e) from None
    for path, shape in zip(paths, shapes):
        if len(shape) != 3:
            raise DataError(f"{path}: a {len(shape)}-D volume {shape}; a KiTS19 case is one 3-D volume (D x H x W), "
                            "re-download the case or save it as 3-D")
        if min(shape) < 1 or np.prod(shape, dtype=np.float64) > MAX_VOXELS:
            raise DataError(f"{path}: a volume of {shape} voxels, outside 1 to {MAX_VOXELS:,}; its header is corrupt, "
                            "re-download the case")
    if shapes[0] != shapes[1]:
        raise DataError(f"{case}: imaging {shapes[0]} and segmentation {shapes[1]} differ in shape; "
                        "re-download the case")
    check_spacing(paths[0], spacing, shapes[0])
    try:
        for path, f in zip(paths, (image_file, label_file)):
            _check_length(path, f)  # before nibabel allocates what the header claims
        image = np.asarray(image_file.get_fdata(), dtype=np.float32)
        label = np.asarray(label_file.get_fdata(), dtype=np.float32)
    except DataError:
        raise
    except Exception as e:  # a truncated or corrupt voxel block
        raise _unreadable(case, e) from None
    check_labels(paths[1], label)
    return image[None], label.astype(np.uint8)[None], spacing  # type: ignore[return-value]


def _unreadable(case: Path, e: Exception) -> DataError:
    reason = " ".join(f"{type(e).__name__}: {e}".split())  # nibabel's messages may span lines
    return DataError(f"{case}: unreadable NIfTI ({reason}); re-download the case")


def _stored_spacing(path: Path) -> tuple[float, float, float]:
    """pixdim[1:4] as the file stores it: nibabel's header check silently turns a 0 into 1 (and a
    negative into its absolute value), which would resample a corrupt case as if it were sane."""
    with gzip.open(path, "rb") as f:
        raw = f.read(168)
    for order in "<>":
        size = struct.unpack(order + "i", raw[:4])[0]
        if size == 348:  # NIfTI-1: 8 float32 from byte 76
            return struct.unpack(order + "3f", raw[80:92])
        if size == 540:  # NIfTI-2: 8 float64 from byte 104
            return struct.unpack(order + "3d", raw[112:136])
    raise ValueError(f"sizeof_hdr {struct.unpack('<i', raw[:4])[0]} is neither NIfTI-1's 348 nor NIfTI-2's 540")


def _check_length(path: Path, nifti) -> None:
    """Refuses a file holding fewer voxel bytes than its header's shape and type need (truncated, or
    a corrupt header): nibabel would first allocate all it claims. The gzip trailer's length settles
    a whole file without reading it; otherwise the file is decompressed, in chunks, and counted."""
    proxy = nifti.dataobj  # what nibabel will read: from its offset, its shape of its type
    need = int(proxy.offset) + int(np.prod(proxy.shape, dtype=np.int64)) * np.dtype(proxy.dtype).itemsize
    with open(path, "rb") as f:
        f.seek(-4, 2)
        if int.from_bytes(f.read(4), "little") == need % 2**32:
            return
    got = 0
    with gzip.open(path, "rb") as f:
        while got < need:
            chunk = f.read(min(1 << 24, need - got))
            if not chunk:
                raise DataError(f"{path}: holds {got:,} bytes where its header needs {need:,}: the file is cut short "
                                "or its header is corrupt; re-download the case")
            got += len(chunk)


def resampled_shape(shape: tuple[int, ...], spacing: tuple[float, ...],
                    target: tuple[float, ...] = TARGET_SPACING) -> list[int]:
    """The reference's resampled shape (truncated), at least one voxel a side."""
    return [max(1, int(n)) for n in np.array(spacing) / np.array(target) * np.array(shape)]


def check_spacing(path: Path, spacing: tuple[float, ...], shape: tuple[int, ...],
                  target: tuple[float, ...] = TARGET_SPACING) -> None:
    """Refuses a pixdim that is not a finite spacing in SPACING_RANGE, or that resamples the volume
    past MAX_VOXELS, before anything is allocated for it."""
    low, high = SPACING_RANGE
    shown = "(" + ", ".join(f"{s:.4g}" for s in spacing) + ")"
    if len(spacing) != 3 or not all(np.isfinite(s) and low <= s <= high for s in spacing):
        raise DataError(f"{path}: voxel spacing (pixdim) {shown} mm is not 3 finite sizes of {low:g}-{high:g} "
                        "mm; fix the header's pixdim or re-download the case")
    voxels = np.prod(np.array(resampled_shape(shape, spacing, target), dtype=np.float64))
    if voxels > MAX_VOXELS:
        raise DataError(f"{path}: resampling {shape} voxels of {shown} mm to {tuple(target)} mm would make "
                        f"{voxels:,.0f} voxels, over the {MAX_VOXELS:,} a case may have; check the header's pixdim")


def check_labels(path: Path, label: np.ndarray) -> None:
    """Labels must be exactly 0, 1 or 2: a float label of 1.5 or 300 would otherwise be cast to uint8
    (300 -> 44) and fail mid-run, or train on wrong classes."""
    valid = (label == 0) | (label == 1) | (label == 2)
    if not valid.all():
        wrong = label[~valid]
        shown = ", ".join(f"{v:g}" for v in np.unique(wrong)[:4])
        raise DataError(f"{path}: {wrong.size:,} voxels have labels other than 0, 1, 2 (background, kidney, "
                        f"tumour): {shown}; re-download the case or fix its segmentation")


def resample(image: np.ndarray, label: np.ndarray, spacing: tuple[float, ...],
             target: tuple[float, ...] = TARGET_SPACING) -> tuple[np.ndarray, np.ndarray]:
    if tuple(spacing) == tuple(target):
        return image, label
    check_spacing(Path("volume"), spacing, image.shape[1:], target)  # load_pair checked a case's (naming it)
    shape = resampled_shape(image.shape[1:], spacing, target)
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
