"""Deterministic batches: the global batch of step s depends only on (seed, s), so the
samples are the same whatever the micro-batch size or the number of processes."""

from __future__ import annotations

import numpy as np
import torch

from trainclock.errors import DataError


def train_batch(tokens: np.ndarray, seed: int, step: int, batch: int, seq_len: int,
                rows: slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets of shape (rows, seq_len): rows `rows` of one optimizer step's
    global batch of `batch` windows. Every rank draws the whole batch's start offsets (a few integers)
    so that its rows are the same whatever the number of ranks, and reads only its own windows."""
    last_start = len(tokens) - seq_len - 1
    if last_start <= 0:
        raise DataError(f"the train split has {len(tokens)} tokens, fewer than one sequence of {seq_len + 1}")
    starts = np.random.default_rng([seed, step]).integers(0, last_start + 1, size=batch)
    return _windows(tokens, starts[rows], seq_len)


def validation_set(tokens: np.ndarray, sequences: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed validation set: `sequences` non-overlapping windows spread evenly over the split."""
    stride = (len(tokens) - 1) // max(sequences, 1)
    if sequences <= 0 or stride < seq_len:
        raise DataError(
            f"the validation split has {len(tokens)} tokens, too few for {sequences} sequences of {seq_len}; "
            "use a larger corpus or fewer eval sequences"
        )
    return _windows(tokens, np.arange(sequences) * stride, seq_len)


def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = np.stack([np.asarray(tokens[s : s + seq_len + 1], dtype=np.int64) for s in starts])
    data = torch.from_numpy(rows)
    return data[:, :-1], data[:, 1:]
