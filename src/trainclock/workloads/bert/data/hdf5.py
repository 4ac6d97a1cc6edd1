"""NVIDIA's HDF5 shards of the bert data (DeepLearningExamples / MLPerf NVIDIA submissions).

Unpacked layout: datasets input_ids, input_mask, segment_ids [N, 512], masked_lm_positions,
masked_lm_ids [N, 76] (position 0 marks an unused slot: there is no weights dataset) and
next_sentence_labels [N].

Packed layout (several sequences per 512-token row, to skip padding): input_mask holds the
sequence's index (1, 2, 3, 0 for padding) instead of 1, `positions` restarts at 0 for each
sequence, masked_lm_positions/ids have 76 + (sequences per pack) slots, and next_sentence_positions,
next_sentence_labels, next_sentence_weights [N, sequences per pack] give each sequence's [CLS]
position, label and presence. trainclock's BERT attends over one sequence per row, so a packed
shard is unpacked on read into the unpacked layout: the same instances, with their padding back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.storage import atomic_writer

KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")
PACKED_KEYS = KEYS + ("positions", "next_sentence_positions", "next_sentence_weights")


def read_instances(paths: list[Path], max_predictions: int = 76) -> dict[str, np.ndarray]:
    import h5py  # only the full config reads HDF5

    parts: dict[str, list[np.ndarray]] = {k: [] for k in KEYS}
    for path in paths:
        try:
            with h5py.File(path, "r") as f:
                packed = "positions" in f
                arrays = {key: np.asarray(f[key][:], dtype=np.int64) for key in (PACKED_KEYS if packed else KEYS)}
        except KeyError as e:
            raise DataError(f"{path}: no dataset {e} (an NVIDIA bert HDF5 shard has {', '.join(KEYS)}; "
                            f"a packed one also {', '.join(PACKED_KEYS[len(KEYS):])})") from None
        except OSError as e:
            raise DataError(f"cannot read HDF5 shard {path} ({e}); re-copy the file") from None
        if packed:
            arrays = unpack(arrays, max_predictions, path)
        for key in KEYS:
            parts[key].append(arrays[key])
    try:
        out = {k: np.concatenate([p.reshape(len(p), -1) if k != "next_sentence_labels" else p.reshape(-1)
                                  for p in v]) for k, v in parts.items()}
    except ValueError:
        raise DataError(f"HDF5 shards of different shapes in {', '.join(map(str, paths))}") from None
    out["masked_lm_weights"] = (out["masked_lm_positions"] != 0).astype(np.float32)
    return out


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
