"""The arithmetic of a data-parallel evaluation, the same for every benchmark: which rows of the
evaluation set a rank scores, how many forwards every rank runs so that sharded ranks meet in each
one, and the model's evaluation mode for the while."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn


def shard_rows(n: int, shard: tuple[int, int]) -> range:
    """Rank `shard[0]` of `shard[1]`'s rows of an evaluation set of `n`: contiguous, in rank order,
    sizes differing by one at most."""
    rank, ranks = shard
    return range(rank * n // ranks, (rank + 1) * n // ranks)


def equal_forwards(n: int, ranks: int, batch: int) -> int:
    """Forwards of `batch` rows each rank runs to cover its share of `n` rows: the same on every
    rank (the largest share's), as FSDP's all-gathers need; a rank out of rows pads."""
    return math.ceil(math.ceil(n / ranks) / batch)


@contextlib.contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """The model in evaluation mode without autograd, back in the mode it was in after (the loop
    evaluates a model in training mode; a test may hand one in evaluation mode)."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)
