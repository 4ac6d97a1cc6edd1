"""Deterministic batches: the global batch of step s depends only on (seed, s), so the samples are
the same whatever the micro-batch size or the number of processes."""

from __future__ import annotations

import numpy as np
import torch

FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
          "masked_lm_weights", "next_sentence_labels")
# packed rows (several sequences a row) also carry each token's position in its sequence and each
# sequence's [CLS] position and presence; next_sentence_labels is then [rows, sequences a row]
PACKED_FIELDS = ("positions", "next_sentence_positions", "next_sentence_weights")
WEIGHTS = ("masked_lm_weights", "next_sentence_weights")


def as_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The model's inputs as tensors (indices as int64, as embeddings and gathers take them), with
    the packed fields where the arrays are packed rows."""
    out = {}
    for name in FIELDS + tuple(f for f in PACKED_FIELDS if f in arrays):
        out[name] = torch.from_numpy(arrays[name].astype(np.float32 if name in WEIGHTS else np.int64))
    return out


def train_batch(train: dict[str, torch.Tensor], seed: int, step: int, batch: int,
                rows: slice = slice(None)) -> dict[str, torch.Tensor]:
    """Rows `rows` of step `step`'s global batch of `batch` sequences: the whole batch's indices are
    drawn (cheap) so a rank's rows do not depend on the number of ranks; only its own are gathered."""
    n = len(train["input_ids"])
    index = torch.from_numpy(np.random.default_rng([seed, step]).choice(n, size=batch, replace=batch > n)[rows])
    return {k: v[index] for k, v in train.items()}


def rows(data: dict[str, torch.Tensor], index: list[int]) -> dict[str, torch.Tensor]:
    return {k: v[index] for k, v in data.items()}
