"""bert-large's data: a folder of training and eval instances at sequence 512 with 76 predictions, in
the reference's TFRecords, NVIDIA's HDF5 shards (unpacked layout), or the arrays this package
prepares (train.npz and eval.npz). Eval files sit in a subfolder named eval* or carry "eval" in
their name (the reference's eval_10k); every other shard is training data."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.errors import DataError, UsageError
from trainclock.workloads.bert.data import hdf5, tfrecord
from trainclock.workloads.bert.data.batches import FIELDS

HDF5_SUFFIXES = (".hdf5", ".h5")
NOT_DATA = (".json", ".txt", ".md")  # a vocabulary or notes beside the shards


def load_folder(path: str | None, seq_len: int, max_predictions: int) -> tuple[dict, dict]:
    if path is None:
        raise UsageError("bert-large trains on Wikipedia in the reference format: pass --data FOLDER "
                         "(TFRecords, NVIDIA HDF5 shards, or train.npz and eval.npz; eval files under eval*/)")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise UsageError(f"--data {path}: no such folder")
    if (folder / "train.npz").exists():
        splits = [_npz(folder / f"{split}.npz") for split in ("train", "eval")]
    else:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
                       and p.suffix not in NOT_DATA)

        def is_eval(p: Path) -> bool:
            return "eval" in p.name or any(part.startswith("eval") for part in p.relative_to(folder).parts[:-1])

        splits = [_read([p for p in files if is_eval(p) == want], folder, seq_len, max_predictions, name)
                  for want, name in ((False, "training"), (True, "eval"))]
    for arrays, name in zip(splits, ("training", "eval")):
        if arrays["input_ids"].shape[1] != seq_len or arrays["masked_lm_positions"].shape[1] != max_predictions:
            raise DataError(f"the {name} data in {folder} hold sequences of {arrays['input_ids'].shape[1]} with "
                            f"{arrays['masked_lm_positions'].shape[1]} predictions; "
                            f"bert-large needs {seq_len} and {max_predictions}")
    return splits[0], splits[1]


def _read(paths: list[Path], folder: Path, seq_len: int, max_predictions: int, name: str) -> dict[str, np.ndarray]:
    if not paths:
        raise DataError(f"no {name} files in {folder}")
    shards = [p for p in paths if p.suffix in HDF5_SUFFIXES]
    if shards:
        return hdf5.read_instances(shards, max_predictions)
    return tfrecord.read_instances(paths, seq_len, max_predictions)


def _npz(file: Path) -> dict[str, np.ndarray]:
    try:
        arrays = dict(np.load(file))
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read {file} ({type(e).__name__}); write train.npz and eval.npz there") from None
    missing = [f for f in FIELDS if f not in arrays]
    if missing:
        raise DataError(f"{file} lacks the field {missing[0]}")
    return arrays
