"""A rank's training rows: the rows of rank r of R, for R = 1, 2, 4, make exactly the whole batch's
rows (before and after an epoch boundary, with the official data's moments and with the tiers'
latents); the samples are the epoch's permutation, drawn once an epoch; and rank 0 of 4 draws the
random streams of its own samples and reads their latents, no others."""

from __future__ import annotations

import pytest
import torch

from trainclock.workloads.stable_diffusion.data import batches as batches_module
from trainclock.workloads.stable_diffusion.data.batches import SampleBatches
from trainclock.workloads.stable_diffusion.data.sets import TrainSet

GLOBAL_BATCH = 8
SAMPLES = 20  # two steps an epoch (the last 4 samples dropped)
EMPTY = torch.zeros(5, dtype=torch.long)


class CountedLatents:
    """latents[pick] as a tensor gives them, counting the samples read (the shard readers' cost)."""

    def __init__(self, latents: torch.Tensor) -> None:
        self.latents, self.read = latents, 0

    def __getitem__(self, pick: torch.Tensor) -> torch.Tensor:
        self.read += len(pick)
        return self.latents[pick]


def train_set(moments: bool) -> TrainSet:
    g = torch.Generator().manual_seed(0)
    latents = torch.randn(SAMPLES, 8 if moments else 4, 4, 4, generator=g)
    return TrainSet(latents, torch.randint(1, 50, (SAMPLES, 5), generator=g), moments=moments)


def sample_batches(train: TrainSet) -> SampleBatches:
    return SampleBatches(train, GLOBAL_BATCH, seed=5, latent_scale=0.5, drop_caption=0.5, empty_id=EMPTY,
                         timesteps=1000)


@pytest.mark.parametrize("moments", [False, True])
@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_the_rows_of_every_rank_make_the_whole_batch(ranks, moments):
    train = train_set(moments)
    whole_batches, rank_batches = sample_batches(train), [sample_batches(train) for _ in range(ranks)]
    per_rank = GLOBAL_BATCH // ranks
    for step in (0, 1, 2, 3, 5):  # an epoch is 2 steps: 2 and 3 after the first boundary, 5 after the second
        whole = whole_batches.batch(step, slice(0, GLOBAL_BATCH))
        parts = [b.batch(step, slice(r * per_rank, (r + 1) * per_rank)) for r, b in enumerate(rank_batches)]
        for key, value in whole.items():
            assert torch.equal(torch.cat([p[key] for p in parts]), value), (step, key)
    assert (whole["ids"] == EMPTY).all(1).any() and not (whole["ids"] == EMPTY).all(1).all()  # some captions dropped


def test_the_samples_are_the_epochs_permutation_drawn_once_an_epoch(monkeypatch):
    permutations = []
    randperm = torch.randperm
    monkeypatch.setattr(torch, "randperm", lambda *a, **k: permutations.append(a) or randperm(*a, **k))
    train = train_set(moments=False)
    batches = sample_batches(train)
    for step in range(4):  # epochs 0 and 1
        order = randperm(SAMPLES, generator=torch.Generator().manual_seed(5 * 100_003 + step // 2))
        pick = order[step % 2 * GLOBAL_BATCH:(step % 2 + 1) * GLOBAL_BATCH]
        assert torch.equal(batches.batch(step, slice(0, GLOBAL_BATCH))["latents"], train.latents[pick])
    assert len(permutations) == 2


def test_rank_zero_of_four_draws_and_reads_only_its_own_samples(monkeypatch):
    streams = []
    original = batches_module.sample_generator
    monkeypatch.setattr(batches_module, "sample_generator", lambda *a: streams.append(a) or original(*a))
    train = train_set(moments=True)
    train.latents = CountedLatents(train.latents)
    rows = slice(0, GLOBAL_BATCH // 4)
    mine = sample_batches(train).batch(3, rows)
    assert len(streams) == 2 and train.latents.read == 2
    assert all(len(v) == 2 for v in mine.values())
