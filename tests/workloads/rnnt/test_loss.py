"""The transducer loss against a brute-force sum over every alignment, on lattices small enough
to enumerate; and its gradient, through the chunked joint, against the unchunked one."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from trainclock.workloads.rnnt.loss import joint_log_probs, lattice_log_probs, transducer_loss


def brute_force(log_probs_TUV: torch.Tensor, labels: list[int], blank: int) -> float:
    """-log of the summed probability of every path: T blanks and U labels in any order, the
    last step a blank (each blank moves t on, each label moves u on)."""
    T, U = log_probs_TUV.shape[0], len(labels)
    total = []
    for blanks_at in itertools.combinations(range(T + U - 1), T - 1):  # the final blank is fixed
        t = u = 0
        score = 0.0
        for step in range(T + U - 1):
            if step in blanks_at:
                score += float(log_probs_TUV[t, u, blank])
                t += 1
            else:
                score += float(log_probs_TUV[t, u, labels[u]])
                u += 1
        total.append(score + float(log_probs_TUV[T - 1, U, blank]))
    return -math.log(sum(math.exp(s) for s in total))


@pytest.mark.parametrize("T,U", [(1, 0), (1, 2), (3, 1), (4, 3), (5, 2)])
def test_loss_matches_the_sum_over_all_alignments(T, U):
    torch.manual_seed(T * 10 + U)
    V, blank = 5, 4
    logits = torch.randn(1, T, U + 1, V, dtype=torch.float64)
    labels = torch.randint(0, blank, (1, U))
    blank_BTU, emit_BTU = lattice_log_probs(logits, labels, blank)
    got = transducer_loss(blank_BTU.double(), emit_BTU.double(), torch.tensor([T]), torch.tensor([U]))
    want = brute_force(logits[0].log_softmax(-1), labels[0].tolist(), blank)
    assert float(got[0]) == pytest.approx(want, rel=1e-10)


def test_padding_in_a_batch_changes_nothing():
    torch.manual_seed(0)
    V, blank = 6, 5
    sizes = [(4, 3), (2, 1), (5, 0)]
    T, U = max(t for t, _ in sizes), max(u for _, u in sizes)
    logits = torch.randn(len(sizes), T, U + 1, V, dtype=torch.float64)
    labels = torch.randint(0, blank, (len(sizes), U))
    b, e = lattice_log_probs(logits, labels, blank)
    batched = transducer_loss(b, e, torch.tensor([t for t, _ in sizes]), torch.tensor([u for _, u in sizes]))
    for i, (t, u) in enumerate(sizes):
        want = brute_force(logits[i, :t, :u + 1].log_softmax(-1), labels[i, :u].tolist(), blank)
        assert float(batched[i]) == pytest.approx(want, rel=1e-10)


def test_gradients_are_finite_and_the_chunked_joint_gives_the_same_ones():
    torch.manual_seed(1)
    B, T, U, H, V = 5, 6, 3, 8, 7
    linear = torch.nn.Linear(H, V)
    joint = lambda f, g: linear(torch.relu(f[:, :, None] + g[:, None]))  # noqa: E731
    f = torch.randn(B, T, H, requires_grad=True)
    g = torch.randn(B, U + 1, H)
    labels = torch.randint(0, V - 1, (B, U))
    frames, lengths = torch.tensor([6, 4, 5, 1, 2]), torch.tensor([3, 2, 0, 1, 3])
    grads = []
    for chunk in (B, 2):
        loss = transducer_loss(*joint_log_probs(joint, f, g, labels, V - 1, chunk), frames, lengths).mean()
        grads.append(torch.autograd.grad(loss, [f, linear.weight]))
    for full, chunked in zip(*grads):
        assert torch.isfinite(full).all()
        torch.testing.assert_close(chunked, full)


def test_written_out_gradient_matches_finite_differences_with_padding():
    """The loss's own backward (not autograd's) against central differences, on a padded batch
    whose utterances end at different frames and labels, one of them with no labels at all."""
    torch.manual_seed(2)
    V, blank = 5, 4
    sizes = [(4, 3), (2, 1), (5, 0), (1, 2)]
    T, U = max(t for t, _ in sizes), max(u for _, u in sizes)
    logits = torch.randn(len(sizes), T, U + 1, V, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, blank, (len(sizes), U))
    frames, lengths = torch.tensor([t for t, _ in sizes]), torch.tensor([u for _, u in sizes])
    weights = torch.tensor([1.0, 0.5, 2.0, 0.25], dtype=torch.float64)  # a non-uniform upstream gradient

    def weighted_loss(x):
        return (transducer_loss(*lattice_log_probs(x, labels, blank), frames, lengths) * weights).sum()

    assert torch.autograd.gradcheck(weighted_loss, (logits,))
    (grad,) = torch.autograd.grad(weighted_loss(logits), logits)
    for i, (t, u) in enumerate(sizes):  # padding gets nothing
        assert grad[i, t:].abs().max() == 0 if t < T else True
        assert grad[i, :, u + 1:].abs().max() == 0 if u < U else True


def test_gradient_is_finite_in_float32_at_full_length():
    """T = 280 frames and U = 130 labels, as at full size: no -inf - -inf, no overflow."""
    torch.manual_seed(3)
    B, T, U, V = 2, 280, 130, 16
    logits = torch.randn(B, T, U + 1, V, requires_grad=True)
    labels = torch.randint(0, V - 1, (B, U))
    loss = transducer_loss(*lattice_log_probs(logits, labels, V - 1), torch.tensor([280, 200]),
                           torch.tensor([130, 90])).sum()
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    # each frame's log-softmax gradient sums to zero over the vocabulary
    torch.testing.assert_close(logits.grad.sum(-1), torch.zeros(B, T, U + 1), atol=1e-4, rtol=0)


def test_a_diverged_call_leaves_the_next_one_with_another_lattice_shape_exact():
    """On the CPU the loss keeps its move buffer for the next call; (T, U) = (6, 1) and (3, 2)
    need buffers of the same size with their lattice points in different places, so NaN from a
    diverged model in one must not reach the other."""
    V, blank = 5, 4
    nan_logits = torch.full((1, 6, 2, V), float("nan"), dtype=torch.float64)
    assert torch.isnan(transducer_loss(*lattice_log_probs(nan_logits, torch.zeros(1, 1, dtype=torch.long), blank),
                                       torch.tensor([6]), torch.tensor([1]))).all()
    for T, U in [(3, 2), (6, 1)]:
        torch.manual_seed(T * 10 + U)
        logits = torch.randn(1, T, U + 1, V, dtype=torch.float64)
        labels = torch.randint(0, blank, (1, U))
        got = transducer_loss(*lattice_log_probs(logits, labels, blank), torch.tensor([T]), torch.tensor([U]))
        assert float(got[0]) == pytest.approx(brute_force(logits[0].log_softmax(-1), labels[0].tolist(), blank), rel=1e-10)
