"""NVIDIA's HDF5 shards of the bert data (DeepLearningExamples / MLPerf NVIDIA submissions).

Unpacked layout: datasets input_ids, input_mask, segment_ids [N, 512], masked_lm_positions,
masked_lm_ids [N, 76] (position 0 marks an unused slot: there is no weights dataset) and
next_sentence_labels [N].

Packed layout (several sequences per 512-token row, to skip padding): input_mask holds the
sequence's index (1, 2, 3, 0 for padding) instead of 1, `positions` restarts at 0 for each
sequence, masked_lm_positions/ids have 76 + (sequences per pack) slots, and next_sentence_positions,
next_sentence_labels, next_sentence_weights [N, sequences per pack] give each sequence's [CLS]
position, label and presence. read_instances(keep_packed=True) keeps them packed. bert-large reads
them unpacked and packs each step's own sequences again (packing.py, in the model's packed layout):
MLPerf counts a global batch and every progress count in sequences, and a batch of the shards'
packed rows would hold a varying number of them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.storage import atomic_writer

KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")
PACKED_KEYS = KEYS + ("positions", "next_sentence_positions", "next_sentence_weights")


def read_instances(paths: list[Path], max_predictions: int = 76, keep_packed: bool = False) -> dict[str, np.ndarray]:
    """The shards' rows: one instance a row (packed shards unpacked), or with `keep_packed` the
    packed layout (unpacked shards as packs of one), masked_lm_weights added either way."""
    import h5py  # only the full config reads HDF5

    parts: list[dict[str, np.ndarray]] = []
    for path in paths:
        try:
            with h5py.File(path, "r") as f:
                packed = "positions" in f
                arrays = {key: _dataset(f, key, path) for key in (PACKED_KEYS if packed else KEYS)}
        except KeyError as e:
            raise DataError(f"{path}: no dataset {e} (an NVIDIA bert HDF5 shard has {', '.join(KEYS)}; "
                            f"a packed one also {', '.join(PACKED_KEYS[len(KEYS):])})") from None
        except (OSError, RuntimeError, ValueError, TypeError) as e:
            raise DataError(f"cannot read HDF5 shard {path} ({_first_line(e)}); re-copy the file") from None
        _check_shapes(arrays, path, packed)
        try:
            if keep_packed:
                arrays = check_packed(arrays, path) if packed else as_packs(arrays)
            elif packed:
                arrays = unpack(arrays, max_predictions, path)
        except (IndexError, ValueError) as e:
            raise DataError(f"{path}: the packed rows are inconsistent ({e}); the shard is damaged, re-create it") from None
        parts.append(arrays)
    keys = PACKED_KEYS if keep_packed else KEYS
    try:
        out = {k: _concat([p[k].reshape(len(p[k]), -1) if k != "next_sentence_labels" or keep_packed
                           else p[k].reshape(-1) for p in parts], pad=keep_packed) for k in keys}
    except ValueError:
        raise DataError(f"HDF5 shards of different shapes in {', '.join(map(str, paths))}") from None
    out["masked_lm_weights"] = (out["masked_lm_positions"] != 0).astype(np.float32)
    return out


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _dataset(f, key: str, path: Path) -> np.ndarray:
    """Dataset `key` as int64, or one DataError line where it is a group or holds no integers."""
    import h5py

    item = f[key]
    if not isinstance(item, h5py.Dataset):
        raise DataError(f"{path}: {key} is an HDF5 {type(item).__name__.lower()}, not a dataset of integers; "
                        "an NVIDIA bert HDF5 shard holds one array per field")
    if item.dtype.kind not in "iub" and not (item.dtype.kind == "f" and key == "masked_lm_weights"):
        raise DataError(f"{path}: dataset {key} holds {item.dtype}, not integers; re-create the shard")
    if item.shape == ():
        raise DataError(f"{path}: dataset {key} is a scalar, not one row per sequence; re-create the shard")
    return np.asarray(item[()], dtype=np.int64)


def _check_shapes(arrays: dict[str, np.ndarray], path: Path, packed: bool) -> None:
    """Every field one row per sequence (or pack), the same number of rows in all, the per-token
    fields as wide as input_ids and the per-prediction ones as masked_lm_positions."""
    rows = {k: len(v) for k, v in arrays.items()}
    if len(set(rows.values())) != 1:
        detail = ", ".join(f"{k} {n}" for k, n in rows.items())
        raise DataError(f"{path}: datasets of different numbers of rows ({detail}); the shard is damaged, re-create it")
    tokens = [k for k in ("input_ids", "input_mask", "segment_ids", "positions") if k in arrays]
    groups = [tokens, ["masked_lm_positions", "masked_lm_ids"]]
    if packed:
        groups.append(["next_sentence_positions", "next_sentence_labels", "next_sentence_weights"])
    for group in groups:
        shapes = {k: arrays[k].shape for k in group}
        if any(len(s) != 2 for s in shapes.values()) or len(set(shapes.values())) != 1:
            detail = ", ".join(f"{k} {s}" for k, s in shapes.items())
            raise DataError(f"{path}: datasets of mismatched shapes ({detail}); the shard is damaged, re-create it")


def _concat(parts: list[np.ndarray], pad: bool) -> np.ndarray:
    """Rows of several shards; packs of another width (3 sequences a row, or one) padded to the widest."""
    if pad and parts[0].ndim == 2:
        width = max(p.shape[1] for p in parts)
        parts = [np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in parts]
    return np.concatenate(parts)


def as_packs(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Unpacked instances in the packed layout, one sequence a pack (its [CLS] at 0, input_mask 1)."""
    mask = (arrays["input_mask"] != 0).astype(np.int64)
    rows, seq_len = mask.shape
    return {**{k: arrays[k] for k in KEYS}, "input_mask": mask, "positions": np.arange(seq_len)[None, :] * mask,
            "next_sentence_labels": arrays["next_sentence_labels"].reshape(rows, 1),
            "next_sentence_positions": np.zeros((rows, 1), np.int64),
            "next_sentence_weights": np.ones((rows, 1), np.int64)}


def check_packed(packed: dict[str, np.ndarray], path: Path) -> dict[str, np.ndarray]:
    """The packed arrays, refused in one line where a sequence does not start (sequence index k + 1
    at position 0) at its next_sentence_position, or a prediction falls on padding."""
    rows, seq_len = packed["input_ids"].shape
    for key in ("next_sentence_positions", "masked_lm_positions"):
        if packed[key].min(initial=0) < 0 or packed[key].max(initial=0) >= seq_len:
            raise DataError(f"{path}: {key} outside the row's {seq_len} tokens; the shard is damaged, re-create it")
    rows = np.arange(rows)[:, None]
    starts = packed["next_sentence_positions"]
    index_K = np.arange(1, starts.shape[1] + 1)[None, :]
    wrong = (packed["next_sentence_weights"] != 0) & ((packed["input_mask"][rows, starts] != index_K)
                                                      | (packed["positions"][rows, starts] != 0))
    if wrong.any():
        r, k = (int(v) for v in np.argwhere(wrong)[0])
        raise DataError(f"{path}: packed row {r} sequence {k + 1} does not start at its next_sentence_position "
                        f"{int(starts[r, k])}; the shard is damaged, re-create it")
    where = packed["masked_lm_positions"]
    off = (where != 0) & (packed["input_mask"][rows, where] == 0)
    if off.any():
        r = int(np.argwhere(off)[0][0])
        raise DataError(f"{path}: packed row {r} predicts a padding token; the shard is damaged, re-create it")
    return packed


def unpack(packed: dict[str, np.ndarray], max_predictions: int, path: Path) -> dict[str, np.ndarray]:
    """One row per sequence of the packed rows, in the unpacked layout."""
    rows, seq_len = packed["input_ids"].shape
    out: dict[str, list] = {k: [] for k in KEYS}
    for r in range(rows):
        for k in np.flatnonzero(packed["next_sentence_weights"][r]):
            tokens = np.flatnonzero(packed["input_mask"][r] == k + 1)
            start = int(packed["next_sentence_positions"][r, k])
            if len(tokens) == 0 or tokens[0] != start or tokens[-1] - start + 1 != len(tokens):
                raise DataError(f"{path}: packed row {r} sequence {k + 1} is not one span starting at its "
                                f"next_sentence_position {start}; the shard is damaged, re-create it")
            end = start + len(tokens)
            for key in ("input_ids", "segment_ids"):
                row = np.zeros(seq_len, np.int64)
                row[: end - start] = packed[key][r, start:end]
                out[key].append(row)
            mask = np.zeros(seq_len, np.int64)
            mask[: end - start] = 1
            out["input_mask"].append(mask)
            where = packed["masked_lm_positions"][r]
            mine = np.flatnonzero((where >= start) & (where < end) & (where != 0))
            if len(mine) > max_predictions:
                raise DataError(f"{path}: packed row {r} sequence {k + 1} has {len(mine)} masked positions, more than "
                                f"{max_predictions}; the shard was packed for another setting")
            positions, ids = np.zeros(max_predictions, np.int64), np.zeros(max_predictions, np.int64)
            positions[: len(mine)] = where[mine] - start
            ids[: len(mine)] = packed["masked_lm_ids"][r, mine]
            out["masked_lm_positions"].append(positions)
            out["masked_lm_ids"].append(ids)
            out["next_sentence_labels"].append(packed["next_sentence_labels"][r, k])
    if not out["input_ids"]:
        raise DataError(f"{path}: a packed shard with no sequences (every next_sentence_weight is 0)")
    return {k: np.stack(v) if k != "next_sentence_labels" else np.asarray(v, np.int64) for k, v in out.items()}


def pack(arrays: dict[str, np.ndarray], max_predictions: int, per_pack: int = 3) -> dict[str, np.ndarray]:
    """NVIDIA's packed layout of unpacked instances: each row takes the next instances while their
    tokens fit and it holds fewer than `per_pack` (next-fit, so unpacking gives them back in order;
    NVIDIA's packer sorts by length first and fills rows a little fuller, about 2 sequences each)."""
    lengths = arrays["input_mask"].sum(axis=1).astype(np.int64)
    seq_len = arrays["input_ids"].shape[1]
    row_of, start_of = np.zeros(len(lengths), np.int64), np.zeros(len(lengths), np.int64)
    row, used, count = -1, seq_len, per_pack
    for i, n in enumerate(lengths.tolist()):
        if used + n > seq_len or count == per_pack:
            row, used, count = row + 1, 0, 0
        row_of[i], start_of[i] = row, used
        used, count = used + n, count + 1
    rows = row + 1
    out = {k: np.zeros((rows, seq_len), np.int32) for k in ("input_ids", "input_mask", "segment_ids", "positions")}
    for k in ("masked_lm_positions", "masked_lm_ids"):  # 15% of a row's tokens, rounded up once per sequence
        out[k] = np.zeros((rows, max_predictions + per_pack), np.int32)
    for k in ("next_sentence_positions", "next_sentence_labels", "next_sentence_weights"):
        out[k] = np.zeros((rows, per_pack), np.int32)
    predicted = np.zeros(rows, np.int64)
    for i, (r, at, n) in enumerate(zip(row_of.tolist(), start_of.tolist(), lengths.tolist())):
        k = i - int(np.searchsorted(row_of, r))  # the sequence's place in its row
        out["input_ids"][r, at:at + n] = arrays["input_ids"][i, :n]
        out["segment_ids"][r, at:at + n] = arrays["segment_ids"][i, :n]
        out["input_mask"][r, at:at + n] = k + 1
        out["positions"][r, at:at + n] = np.arange(n)
        used = np.flatnonzero(arrays["masked_lm_positions"][i])  # position 0 ([CLS]) marks an unused slot
        slots = slice(predicted[r], predicted[r] + len(used))
        out["masked_lm_positions"][r, slots] = arrays["masked_lm_positions"][i, used] + at
        out["masked_lm_ids"][r, slots] = arrays["masked_lm_ids"][i, used]
        predicted[r] += len(used)
        out["next_sentence_positions"][r, k] = at
        out["next_sentence_labels"][r, k] = arrays["next_sentence_labels"][i]
        out["next_sentence_weights"][r, k] = 1
    return out


def write_instances(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """The instances as one NVIDIA HDF5 shard (unpacked layout, its dtypes), written atomically."""
    # no weights dataset: an unused prediction slot has position 0
    _write(path, {k: arrays[k].astype(np.int8 if k == "next_sentence_labels" else np.int32) for k in KEYS})


def write_packed(path: Path, packed: dict[str, np.ndarray]) -> None:
    """Packed rows (pack's output) as one NVIDIA HDF5 shard in the packed layout, written atomically."""
    _write(path, {k: packed[k].astype(np.int32) for k in PACKED_KEYS})


def _write(path: Path, datasets: dict[str, np.ndarray]) -> None:
    import h5py

    with atomic_writer(path, "wb") as f, h5py.File(f, "w") as shard:
        for key, value in datasets.items():
            shard.create_dataset(key, data=value, compression="gzip")
