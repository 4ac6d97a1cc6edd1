"""NVIDIA's HDF5 shards of the bert data (DeepLearningExamples / MLPerf NVIDIA submissions, the
unpacked layout): datasets input_ids, input_mask, segment_ids [N, 512], masked_lm_positions,
masked_lm_ids [N, 76] (position 0 marks an unused slot: there is no weights dataset) and
next_sentence_labels [N]."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.errors import DataError

KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")


def read_instances(paths: list[Path]) -> dict[str, np.ndarray]:
    import h5py  # only the full config reads HDF5

    parts: dict[str, list[np.ndarray]] = {k: [] for k in KEYS}
    for path in paths:
        try:
            with h5py.File(path, "r") as f:
                for key in KEYS:
                    parts[key].append(np.asarray(f[key][:], dtype=np.int64))
        except KeyError as e:
            raise DataError(f"{path}: no dataset {e} (an NVIDIA bert HDF5 shard has {', '.join(KEYS)})") from None
        except OSError as e:
            raise DataError(f"cannot read HDF5 shard {path} ({e}); re-copy the file") from None
    try:
        out = {k: np.concatenate(v) for k, v in parts.items()}
    except ValueError:
        raise DataError(f"HDF5 shards of different shapes in {', '.join(map(str, paths))}") from None
    out["next_sentence_labels"] = out["next_sentence_labels"].reshape(-1)
    out["masked_lm_weights"] = (out["masked_lm_positions"] != 0).astype(np.float32)
    return out
