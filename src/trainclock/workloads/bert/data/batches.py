"""Deterministic batches: the global batch of step s depends only on (seed, s), so the samples are
the same whatever the micro-batch size or the number of processes."""

from __future__ import annotations

import numpy as np
import torch

FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
          "masked_lm_weights", "next_sentence_labels")


def as_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The model's inputs as tensors (indices as int64, as embeddings and gathers take them)."""
    out = {}
    for name in FIELDS:
        a = arrays[name]
        out[name] = torch.from_numpy(a.astype(np.float32 if name == "masked_lm_weights" else np.int64))
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
