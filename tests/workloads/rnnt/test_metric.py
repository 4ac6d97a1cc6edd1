"""WER against a direct word edit-distance computation, summed over ranks' shards as the loop does;
the batched greedy decoder against decoding each utterance alone, and against the frame-by-frame
decoder it replaced (kept here as the reference: it read the host at every symbol), with the
per-frame and per-utterance limits reached; and it reads the host only every few steps."""

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
    from trainclock.workload.base import EvalShard

    assert score(EvalShard(sums=summed))["WER"] == pytest.approx(direct)
    # not a mean of per-shard rates
    assert direct != pytest.approx(sum(score(s)["WER"] for s in shards) / 3)
    assert score(wer_sums([], []))["WER"] == 1.0  # a rank with no utterances adds nothing


def frame_loop_decode(model: RNNT, feats_BTF, lens_B, per_utterance: int = 300, per_frame: int = 30) -> list[list[int]]:
    """The previous decoder: every row on the same frame, pieces read back one by one."""
    f_BTH, lens_B = model.encode(feats_BTF, lens_B)
    B, blank = f_BTH.size(0), model.config.blank
    g, state = model.predict(None, None, start=False)
    g, state = g.expand(B, -1, -1).contiguous(), tuple(s.expand(-1, B, -1).contiguous() for s in state)
    out: list[list[int]] = [[] for _ in range(B)]
    counts = torch.zeros(B, dtype=torch.long)
    for t in range(f_BTH.size(1)):
        active = (lens_B > t) & (counts < per_utterance)
        for _ in range(per_frame):
            if not active.any():
                break
            k = model.joint(f_BTH[:, t:t + 1], g)[:, 0, 0].argmax(-1)
            emit = active & (k != blank)
            if not emit.any():
                break
            g_new, state_new = model.predict(k.clamp(max=blank - 1)[:, None], state, start=False)
            g = torch.where(emit[:, None, None], g_new, g)
            state = tuple(torch.where(emit[None, :, None], new, old) for new, old in zip(state_new, state))
            for i in emit.nonzero().flatten().tolist():
                out[i].append(int(k[i]))
            counts += emit.long()
            active = emit & (counts < per_utterance)
    return out


def chatty_model(seed: int, blank_bias: float) -> RNNT:
    """A random network whose blank logit is shifted: negative, it emits several pieces a frame."""
    torch.manual_seed(seed)
    model = RNNT(RNNTConfig(in_features=12, vocab=9, enc_hidden=16, enc_pre_layers=1, enc_post_layers=1,
                            pred_hidden=8, pred_layers=1, joint_hidden=8, weights_init_scale=2.0)).eval()
    with torch.no_grad():
        model.joint_net[-1].bias[-1] += blank_bias
    return model


@pytest.mark.parametrize("seed,blank_bias,per_utterance,per_frame", [(0, 0.0, 300, 30), (1, -3.0, 300, 3),
                                                                      (2, -3.0, 9, 30), (3, -1.0, 300, 30)])
def test_batched_decoding_gives_the_frame_loops_pieces(seed, blank_bias, per_utterance, per_frame):
    model = chatty_model(seed, blank_bias)
    feats, lens = torch.randn(6, 23, 12), torch.tensor([23, 4, 17, 1, 9, 20])
    ours = greedy_decode(model, feats, lens, per_utterance, per_frame)
    assert ours == frame_loop_decode(model, feats, lens, per_utterance, per_frame)
    assert any(ours)
    if per_utterance < 300:
        assert max(map(len, ours)) == per_utterance


def test_decoding_reads_the_host_every_few_steps_not_per_symbol():
    from tests.workloads.rnnt.test_features import HostReads

    model = chatty_model(1, -3.0)
    feats, lens = torch.randn(4, 30, 12), torch.tensor([30, 12, 25, 7])
    with HostReads() as reads:
        pieces = greedy_decode(model, feats, lens, per_frame=3, check_every=16)
    steps = 15 + max(map(len, pieces))  # 15 encoder frames (stacked by 2), then a step per piece at most
    assert sum(map(len, pieces)) > 20 and reads.count <= steps // 16 + 1


def test_batched_greedy_decoding_decodes_each_utterance_as_alone():
    torch.manual_seed(0)
    model = RNNT(RNNTConfig(in_features=12, vocab=9, enc_hidden=16, enc_pre_layers=1, enc_post_layers=1,
                            pred_hidden=8, pred_layers=1, joint_hidden=8, weights_init_scale=2.0)).eval()
    feats, lens = torch.randn(3, 11, 12), torch.tensor([11, 4, 7])
    batched = greedy_decode(model, feats, lens, per_utterance=6)
    alone = [greedy_decode(model, feats[i:i + 1, :lens[i]], lens[i:i + 1], per_utterance=6)[0] for i in range(3)]
    assert batched == alone and any(batched) and all(len(p) <= 6 for p in batched)
    assert [] == greedy_decode(model, feats[:1], torch.tensor([0]))[0]  # no frames, no pieces
