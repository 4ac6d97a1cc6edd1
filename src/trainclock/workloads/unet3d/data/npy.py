"""The preprocessed KiTS19 the training reads: case_XXXXX_x.npy (float32 image, 1xDxHxW) and
case_XXXXX_y.npy (uint8 labels 0/1/2, same shape) pairs in one folder, split into train and
evaluation cases by a fixed list (the reference's 42 evaluation cases for KiTS19). Arrays are
memory-mapped: the 210 full-size cases need not fit in memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainclock.errors import DataError, require_folder
from trainclock.workloads.unet3d.data.evaluation_cases import EVALUATION_CASES

MAX_LABEL = 2  # labels 0 background, 1 kidney, 2 tumour


@dataclass(frozen=True)
class Case:
    name: str  # case_00042
    image: np.ndarray  # float32 1xDxHxW
    label: np.ndarray  # uint8 1xDxHxW


@dataclass(frozen=True)
class Split:
    train: list[Case]
    eval: list[Case]


def reference_eval_cases() -> list[str]:
    """The reference's fixed 42 evaluation case ids of KiTS19."""
    return list(EVALUATION_CASES)


def load_case(folder: Path, name: str, min_shape: tuple[int, ...]) -> Case:
    x_path, y_path = folder / f"{name}_x.npy", folder / f"{name}_y.npy"
    for path in (x_path, y_path):
        if not path.is_file():
            raise DataError(f"{path} is missing; every case needs both {name}_x.npy and {name}_y.npy "
                            "(re-run the preprocessing)")
    try:
        image = np.load(x_path, mmap_mode="r", allow_pickle=False)
        label = np.load(y_path, mmap_mode="r", allow_pickle=False)
    except Exception as e:  # numpy's header parser raises many kinds (ValueError, SyntaxError, TokenError, ...)
        reason = " ".join(f"{type(e).__name__}: {e}".split())
        raise DataError(f"{folder / name}_[xy].npy: unreadable .npy ({reason}); re-run the preprocessing") from None
    if image.ndim != 4 or image.shape[0] != 1 or image.shape != label.shape:
        raise DataError(f"{folder / name}: image {image.shape} and label {label.shape} must both be 1xDxHxW and equal; "
                        "re-run the preprocessing")
    if image.dtype != np.float32 or label.dtype != np.uint8:
        raise DataError(f"{folder / name}: image must be float32 and label uint8 (got {image.dtype}, {label.dtype}); "
                        "re-run the preprocessing")
    if label.size and int(label.max()) > MAX_LABEL:  # uint8: never below 0; a chunked read of the mapped file
        values = ", ".join(str(v) for v in np.unique(label[label > MAX_LABEL])[:4])
        raise DataError(f"{y_path}: labels must be 0, 1 or 2 (background, kidney, tumour), found {values}; "
                        "re-run the preprocessing from KiTS19's segmentation.nii.gz")
    if any(s < m for s, m in zip(image.shape[1:], min_shape)):
        raise DataError(f"{folder / name}: volume {image.shape[1:]} is smaller than the patch {min_shape}; "
                        "preprocessing pads every case to at least the patch shape, re-run it")
    return Case(name, image, label)


def load_split(folder: Path, eval_cases: list[str], min_shape: tuple[int, ...]) -> Split:
    """Train and evaluation cases of a folder of .npy pairs, in case order."""
    require_folder(folder, "pass --data with the preprocessed KiTS19 folder")
    names = sorted({p.name[:-len("_x.npy")] for p in folder.glob("case_*_x.npy")}
                   | {p.name[:-len("_y.npy")] for p in folder.glob("case_*_y.npy")})
    if not names:
        raise DataError(f"no case_XXXXX_x.npy / case_XXXXX_y.npy pairs in {folder}; preprocess KiTS19 first "
                        "(trainclock data prepare unet3d --data KITS19_FOLDER)")
    cases = [load_case(folder, n, min_shape) for n in names]
    wanted = set(eval_cases)
    split = Split([c for c in cases if c.name.split("_")[-1] not in wanted],
                  [c for c in cases if c.name.split("_")[-1] in wanted])
    if not split.train or not split.eval:
        raise DataError(f"{folder}: {len(split.train)} train and {len(split.eval)} evaluation cases; both must be "
                        f"present (evaluation cases: {', '.join(sorted(wanted)[:5])}, ...)")
    return split
