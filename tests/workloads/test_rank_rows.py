"""Every benchmark's `job.batch(step, rows)`: a data-parallel rank builds only its own rows of a
global batch, and they are exactly those rows of the whole batch (up to zero padding of sequences
to a batch's longest), whatever the number of ranks (so 1 and N processes train on the same samples). Each -tiny tier, from the registry, on its default
data (prepared once in the real data home, as the end-to-end tests do)."""

from __future__ import annotations

import pytest
import torch

from tests.workloads.helpers import prepare_data
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload import registry
from trainclock.workload.base import RunSettings

CPU = torch.device("cpu")
TIERS = sorted(m.name for w in registry.workloads() for m in w.members() if m.name.endswith("-tiny"))


def equal_up_to_zero_padding(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal where both have values, zeros beyond: a rank's batch may pad its sequences to its own
    longest one (the workload's loss reads each sample's own length), the whole batch to the longest of all."""
    if a.dim() != b.dim() or a.shape[0] != b.shape[0]:
        return False
    common = tuple(slice(0, min(x, y)) for x, y in zip(a.shape, b.shape))
    rest_is_zero = all(int(t.count_nonzero()) == int(t[common].count_nonzero()) for t in (a, b))
    return torch.equal(a[common], b[common]) and rest_is_zero


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and equal_up_to_zero_padding(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.slow
@pytest.mark.parametrize("member", TIERS)
def test_a_ranks_rows_are_those_rows_of_the_whole_batch(member, monkeypatch):
    monkeypatch.delenv("TRAINCLOCK_HOME", raising=False)  # the tiers' data, prepared once for the session
    prepare_data(member)
    workload, name = registry.find(member)
    spec = workload.resolve(name, RunSettings(), Layout(), CPU)
    job = workload.build_job(spec, single_process(), CPU, 7, RunSettings())
    batch = job.global_batch_size
    checked = 0
    for ranks in (2, 4):
        if batch % ranks:
            continue
        per_rank = batch // ranks
        for step in (0, 3):
            whole = job.batch(step, slice(0, batch))
            for rank in range(ranks):
                mine = slice(rank * per_rank, (rank + 1) * per_rank)
                assert same(job.batch(step, mine), job.batches.rows(whole, mine)), (member, ranks, rank, step)
                checked += 1
    assert checked, f"{member}'s global batch of {batch} divides over neither 2 nor 4 ranks"
