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


def load_folder(path: str | None, seq_len: int, max_predictions: int,
                vocab_size: int | None = None) -> tuple[dict, dict]:
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
        check_instances(arrays, f"the {name} data in {folder}", vocab_size)
        if arrays["input_ids"].shape[1] != seq_len or arrays["masked_lm_positions"].shape[1] != max_predictions:
            raise DataError(f"the {name} data in {folder} hold sequences of {arrays['input_ids'].shape[1]} with "
                            f"{arrays['masked_lm_positions'].shape[1]} predictions; "
                            f"bert-large needs {seq_len} and {max_predictions}")
    return splits[0], splits[1]


ROW_FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def check_instances(arrays: dict[str, np.ndarray], where: str, vocab_size: int | None = None) -> None:
    """One DataError line unless the arrays are instances a step can gather from: numbers, one row
    per sequence in every field (2-D, next_sentence_labels 1-D), the same number of rows in all, and
    ids, positions and labels in range (an out-of-range one would fail in the middle of the run)."""
    for key in FIELDS:
        value = arrays.get(key)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in ("f" if key == "masked_lm_weights" else "") + "iub":
            kind = "missing" if value is None else f"{getattr(value, 'dtype', type(value).__name__)}"
            raise DataError(f"{where}: {key} is {kind}, expected an array of numbers; re-create the data")
        wanted = 1 if key == "next_sentence_labels" else 2
        if value.ndim != wanted and not (key == "next_sentence_labels" and value.ndim == 2 and value.shape[1] == 1):
            raise DataError(f"{where}: {key} has shape {value.shape}, expected {wanted} dimension(s) "
                            f"({'one label' if wanted == 1 else 'one row'} per sequence); re-create the data")
    rows = {key: len(arrays[key]) for key in FIELDS}
    if len(set(rows.values())) != 1:
        detail = ", ".join(f"{k} {n}" for k, n in rows.items())
        raise DataError(f"{where}: the fields have different numbers of rows ({detail}); re-create the data")
    if rows["input_ids"] == 0:
        raise DataError(f"{where}: no instances; re-create the data")
    for key in ROW_FIELDS[1:3]:
        if arrays[key].shape != arrays["input_ids"].shape:
            raise DataError(f"{where}: {key} has shape {arrays[key].shape}, input_ids {arrays['input_ids'].shape}; "
                            "re-create the data")
    for key in ROW_FIELDS[4:]:
        if arrays[key].shape != arrays["masked_lm_positions"].shape:
            raise DataError(f"{where}: {key} has shape {arrays[key].shape}, masked_lm_positions "
                            f"{arrays['masked_lm_positions'].shape}; re-create the data")
    seq_len = arrays["input_ids"].shape[1]
    limits = {"masked_lm_positions": seq_len, "segment_ids": 2, "next_sentence_labels": 2}
    if vocab_size is not None:
        limits |= {"input_ids": vocab_size, "masked_lm_ids": vocab_size}
    for key, limit in limits.items():
        value = arrays[key]
        if value.size and (value.min() < 0 or value.max() >= limit):
            raise DataError(f"{where}: {key} holds {int(value.min())}..{int(value.max())}, outside 0..{limit - 1}; "
                            "re-create the data (for this model's vocabulary and sequence length)")


def _read(paths: list[Path], folder: Path, seq_len: int, max_predictions: int, name: str) -> dict[str, np.ndarray]:
    if not paths:
        raise DataError(f"no {name} files in {folder}")
    shards = [p for p in paths if p.suffix in HDF5_SUFFIXES]
    if shards:
        return hdf5.read_instances(shards, max_predictions)
    return tfrecord.read_instances(paths, seq_len, max_predictions)


def _npz(file: Path) -> dict[str, np.ndarray]:
    import zipfile
    import zlib

    try:
        loaded = np.load(file, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise DataError(f"{file} is a single .npy array, not an .npz of the instance fields; write train.npz "
                            "and eval.npz there")
        with loaded:
            arrays = {k: loaded[k] for k in loaded.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise DataError(f"cannot read {file} ({type(e).__name__}); write train.npz and eval.npz there") from None
    missing = [f for f in FIELDS if f not in arrays]
    if missing:
        raise DataError(f"{file} lacks the field {missing[0]}")
    check_instances(arrays, str(file))
    return arrays
