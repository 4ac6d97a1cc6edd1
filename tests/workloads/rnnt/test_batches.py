"""A rank's training rows: the rows of rank r of R, for R = 1, 2, 4, make exactly the whole batch's
rows (before and after an epoch boundary, through the lookahead thread too); rank 0 of 4
featurises its own utterances and no others; and the loss does not depend on how far a batch is
padded, which is what lets a rank pad its rows to their own longest utterance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainclock.workloads.rnnt.data import batches as batches_module
from trainclock.workloads.rnnt.data.batches import BucketBatches, Utterances
from trainclock.workloads.rnnt.data.librispeech import Utterance
from trainclock.workloads.rnnt.features import SAMPLE_RATE, FeatureConfig
from trainclock.workloads.rnnt.loss import transducer_loss
from trainclock.workloads.rnnt.model import RNNT, RNNTConfig

GLOBAL_BATCH = 8
UTTERANCES = 20  # two steps an epoch (the last 4 utterances dropped)


class Letters:
    def encode(self, text: str) -> list[int]:
        return [ord(c) - ord("a") for c in text if c.isalpha()]


class Tones(Utterances):
    """Utterances of different lengths whose audio is a tone made on the spot (no files)."""

    def __init__(self) -> None:
        items = [Utterance(f"u{i}.flac", "abcdefgh"[:1 + i % 8], 0.3 + 0.05 * i) for i in range(UTTERANCES)]
        super().__init__(items, Letters(), cache=False)

    def audio(self, i: int) -> np.ndarray:
        t = np.arange(int(self.items[i].duration * SAMPLE_RATE)) / SAMPLE_RATE
        return (0.3 * np.sin(2 * np.pi * (200 + 40 * i) * t)).astype(np.float32)


def bucket_batches() -> BucketBatches:
    return BucketBatches(Tones(), GLOBAL_BATCH, buckets=2, features=FeatureConfig(), seed=3)


def padded(batch: dict[str, torch.Tensor], frames: int, labels: int) -> dict[str, torch.Tensor]:
    """The batch padded with zeros to `frames` feature frames and `labels` label columns."""
    feats, pieces = batch["feats"], batch["labels"]
    return {**batch, "feats": torch.nn.functional.pad(feats, (0, 0, 0, frames - feats.size(1))),
            "labels": torch.nn.functional.pad(pieces, (0, labels - pieces.size(1)))}


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_the_rows_of_every_rank_make_the_whole_batch(ranks):
    whole_batches, rank_batches = bucket_batches(), [bucket_batches() for _ in range(ranks)]
    per_rank = GLOBAL_BATCH // ranks
    for step in (0, 1, 2, 3, 5):  # an epoch is 2 steps: 2 and 3 after the first boundary, 5 after the second
        whole = whole_batches.batch(step)
        parts = [b.batch(step, slice(r * per_rank, (r + 1) * per_rank)) for r, b in enumerate(rank_batches)]
        frames, labels = whole["feats"].size(1), whole["labels"].size(1)
        parts = [padded(p, frames, labels) for p in parts]
        for key, value in whole.items():
            assert torch.equal(torch.cat([p[key] for p in parts]), value), (step, key)


def test_rank_zero_of_four_featurises_only_its_own_utterances(monkeypatch):
    data = Tones()
    read: list[np.ndarray] = []  # this test's audio only
    monkeypatch.setattr(data, "audio", lambda i: read.append(Tones.audio(data, i)) or read[-1])
    featurised = []
    original = batches_module.utterance_features

    def counted(audio, *args, **kwargs):
        if any(audio is mine for mine in read):
            featurised.append(len(audio))
        return original(audio, *args, **kwargs)

    monkeypatch.setattr(batches_module, "utterance_features", counted)
    batches = BucketBatches(data, GLOBAL_BATCH, buckets=2, features=FeatureConfig(), seed=3)
    rows = slice(0, GLOBAL_BATCH // 4)
    mine = batches.batch(4, rows)
    assert len(featurised) == 2 and mine["feats"].size(0) == 2


def test_the_loss_does_not_depend_on_the_padding_length():
    torch.manual_seed(0)
    config = RNNTConfig(vocab=8, enc_hidden=16, enc_pre_layers=1, enc_post_layers=1, pred_hidden=8, pred_layers=1,
                        joint_hidden=8, enc_dropout=0.0, pred_dropout=0.0, joint_dropout=0.0, joint_chunk=2)
    model = RNNT(config).eval()
    batch = bucket_batches().batch(0, slice(0, 4))
    # far past both the longest utterance and the longest transcript, with noise and labels, not zeros, in the padding
    longer = padded(batch, batch["feats"].size(1) + 7, batch["labels"].size(1) + 3)
    tail = batch["feat_lens"][:, None] <= torch.arange(longer["feats"].size(1))[None]
    longer["feats"] = longer["feats"] + tail[..., None] * torch.randn(longer["feats"].shape)
    longer["labels"][:, batch["labels"].size(1):] = torch.randint(0, config.vocab, (4, 3))

    def losses(b: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            blank, emit, frames = model(b["feats"], b["feat_lens"], b["labels"])
            return transducer_loss(blank, emit, frames, b["label_lens"])

    assert torch.allclose(losses(longer), losses(batch), rtol=1e-5, atol=1e-5)
