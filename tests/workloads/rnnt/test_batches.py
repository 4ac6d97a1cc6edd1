"""A rank's training rows: the rows of rank r of R, for R = 1, 2, 4, make exactly the whole batch's
rows (before and after an epoch boundary), and their features on the device those rows of the
whole batch's features; rank 0 of 4 decodes its own utterances and no others; and the loss does
not depend on how far a batch is padded, which is what lets a rank pad its rows to their own
longest utterance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainclock.workloads.rnnt.data.batches import BucketBatches, Utterances
from trainclock.workloads.rnnt.data.librispeech import Utterance
from trainclock.workloads.rnnt.features import SAMPLE_RATE, FeatureConfig, features
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
        return (10_000 * np.sin(2 * np.pi * (200 + 40 * i) * t)).astype(np.int16)


def bucket_batches() -> BucketBatches:
    return BucketBatches(Tones(), GLOBAL_BATCH, buckets=2, features=FeatureConfig(), seed=3)


def pad_to(t: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, width - t.size(1)))


def padded(batch: dict[str, torch.Tensor], like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch's audio, frame masks and labels padded with zeros to the widths of `like`'s."""
    return {k: pad_to(v, like[k].size(1)) if k in ("audio", "time_mask", "labels") else v for k, v in batch.items()}


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_the_rows_of_every_rank_make_the_whole_batch(ranks):
    whole_batches, rank_batches = bucket_batches(), [bucket_batches() for _ in range(ranks)]
    per_rank = GLOBAL_BATCH // ranks
    for step in (0, 1, 2, 3, 5):  # an epoch is 2 steps: 2 and 3 after the first boundary, 5 after the second
        whole = whole_batches.batch(step)
        parts = [b.batch(step, slice(r * per_rank, (r + 1) * per_rank)) for r, b in enumerate(rank_batches)]
        for key, value in whole.items():
            assert torch.equal(torch.cat([padded(p, whole)[key] for p in parts]), value), (step, key)
        feats, lens = features(whole, FeatureConfig())
        assert bool((feats.abs().sum(2) > 0).any())
        for r, part in enumerate(parts):  # each rank's features: the whole batch's rows, to float rounding
            mine, mine_lens = features(part, FeatureConfig())
            rows = slice(r * per_rank, (r + 1) * per_rank)
            assert torch.equal(mine_lens, lens[rows]) and not feats[rows, mine.size(1):].any()
            torch.testing.assert_close(mine, feats[rows, :mine.size(1)], rtol=0, atol=1e-5)


def test_rank_zero_of_four_decodes_only_its_own_utterances(monkeypatch):
    data = Tones()
    read: list[int] = []
    monkeypatch.setattr(data, "audio", lambda i: read.append(i) or Tones.audio(data, i))
    batches = BucketBatches(data, GLOBAL_BATCH, buckets=2, features=FeatureConfig(), seed=3)
    rows = slice(0, GLOBAL_BATCH // 4)
    mine = batches.batch(4, rows)
    assert read == [int(i) for i in batches.order(2)[0][rows]] and mine["audio"].size(0) == 2


def test_the_loss_does_not_depend_on_the_padding_length():
    torch.manual_seed(0)
    config = RNNTConfig(vocab=8, enc_hidden=16, enc_pre_layers=1, enc_post_layers=1, pred_hidden=8, pred_layers=1,
                        joint_hidden=8, enc_dropout=0.0, pred_dropout=0.0, joint_dropout=0.0, joint_chunk=2)
    model = RNNT(config).eval()
    raw = bucket_batches().batch(0, slice(0, 4))
    feats, feat_lens = features(raw, FeatureConfig())
    batch = {"feats": feats, "feat_lens": feat_lens, "labels": raw["labels"], "label_lens": raw["label_lens"]}
    # far past both the longest utterance and the longest transcript, with noise and labels, not zeros, in the padding
    longer = {**batch, "feats": torch.nn.functional.pad(feats, (0, 0, 0, 7)), "labels": pad_to(raw["labels"], raw["labels"].size(1) + 3)}
    tail = batch["feat_lens"][:, None] <= torch.arange(longer["feats"].size(1))[None]
    longer["feats"] = longer["feats"] + tail[..., None] * torch.randn(longer["feats"].shape)
    longer["labels"][:, batch["labels"].size(1):] = torch.randint(0, config.vocab, (4, 3))

    def losses(b: dict[str, torch.Tensor]) -> torch.Tensor:
        with torch.no_grad():
            blank, emit, frames = model(b["feats"], b["feat_lens"], b["labels"])
            return transducer_loss(blank, emit, frames, b["label_lens"])

    assert torch.allclose(losses(longer), losses(batch), rtol=1e-5, atol=1e-5)
