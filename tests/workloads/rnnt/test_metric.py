"""WER against a direct word edit-distance computation, summed over ranks' shards as the loop does;
the batched greedy decoder against decoding each utterance alone."""

from __future__ import annotations

import pytest
import torch

from trainclock.workloads.rnnt.decode import greedy_decode
from trainclock.workloads.rnnt.metric import score, wer_sums
from trainclock.workloads.rnnt.model import RNNT, RNNTConfig


def edit_distance(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def test_wer_over_shards_is_the_whole_sets_word_error_rate():
    refs = ["one two three", "red green", "stop", "open the blue door now", "yes no yes", "cat"]
    hyps = ["one three", "red green blue", "", "open a blue door now", "yes no yes", "dog cat"]
    direct = sum(edit_distance(h.split(), r.split()) for h, r in zip(hyps, refs)) / sum(len(r.split()) for r in refs)
    shards = [wer_sums(hyps[:2], refs[:2]), wer_sums(hyps[2:5], refs[2:5]), wer_sums(hyps[5:], refs[5:])]
    summed = {k: sum(s.sums[k] for s in shards) for k in shards[0].sums}
    from trainclock.workloads.base import EvalShard

    assert score(EvalShard(sums=summed))["WER"] == pytest.approx(direct)
    # not a mean of per-shard rates
    assert direct != pytest.approx(sum(score(s)["WER"] for s in shards) / 3)
    assert score(wer_sums([], []))["WER"] == 1.0  # a rank with no utterances adds nothing


def test_batched_greedy_decoding_decodes_each_utterance_as_alone():
    torch.manual_seed(0)
    model = RNNT(RNNTConfig(in_features=12, vocab=9, enc_hidden=16, enc_pre_layers=1, enc_post_layers=1,
                            pred_hidden=8, pred_layers=1, joint_hidden=8, weights_init_scale=2.0)).eval()
    feats, lens = torch.randn(3, 11, 12), torch.tensor([11, 4, 7])
    batched = greedy_decode(model, feats, lens, per_utterance=6)
    alone = [greedy_decode(model, feats[i:i + 1, :lens[i]], lens[i:i + 1], per_utterance=6)[0] for i in range(3)]
    assert batched == alone and any(batched) and all(len(p) <= 6 for p in batched)
    assert [] == greedy_decode(model, feats[:1], torch.tensor([0]))[0]  # no frames, no pieces
