"""Deterministic batches: the samples of optimizer step s depend only on (seed, s), as an epoch-wise
shuffle (the reference's Trainer draws a random order each epoch): every rank computes the same
order and reads only its own rows, whatever the number of ranks or the micro-batch size."""

from __future__ import annotations

import numpy as np
import torch


def sample_indices(n_samples: int, seed: int, step: int, global_batch_size: int, rows: slice = slice(None)) -> np.ndarray:
    """Indices into the training set of the rows `rows` of step `step`'s global batch."""
    first = step * global_batch_size
    positions = np.arange(first, first + global_batch_size)[rows]
    epochs = positions // n_samples
    out = np.empty(len(positions), dtype=np.int64)
    for epoch in np.unique(epochs):  # a batch spans at most two epochs
        order = np.random.default_rng([seed, int(epoch)]).permutation(n_samples)
        here = epochs == epoch
        out[here] = order[positions[here] % n_samples]
    return out


def select(inputs: torch.Tensor, labels: torch.Tensor, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    index = torch.from_numpy(indices)
    return inputs[index].long(), labels[index].long()
