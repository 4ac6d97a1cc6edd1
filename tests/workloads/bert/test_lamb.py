"""LAMB against a direct transcription of the reference's update (TF LAMBOptimizer in MLPerf's
bert: bias-corrected Adam step, decay added, trust ratio ||w|| / ||update|| on matrices only)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from trainclock.optim.lamb import Lamb, PolyWarmup

LOOP_REFERENCE = Path(__file__).resolve().parents[3] / "benchmarks" / "reference" / "lamb_loop.py"


def reference_lamb(w, grads, lr, beta1, beta2, eps, decay, adapt):
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        update = (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
        ratio = 1.0
        if adapt:
            update = update + decay * w
            w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        w = w - lr * ratio * update
    return w


def test_lamb_matches_the_reference_update_on_a_matrix_and_a_bias():
    rng = np.random.default_rng(0)
    model = torch.nn.Linear(5, 3).double()
    w0, b0 = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
    setup = Lamb(PolyWarmup(0.01, 100), beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1)
    optimizer = setup.build(model)
    gw, gb = [rng.normal(size=w0.shape) for _ in range(4)], [rng.normal(size=b0.shape) for _ in range(4)]
    for g_w, g_b in zip(gw, gb):
        model.weight.grad, model.bias.grad = torch.from_numpy(g_w), torch.from_numpy(g_b)
        optimizer.step()
    expected_w = reference_lamb(w0, gw, 0.01, 0.8, 0.95, 1e-6, 0.1, adapt=True)
    expected_b = reference_lamb(b0, gb, 0.01, 0.8, 0.95, 1e-6, 0.1, adapt=False)  # no decay, no ratio on biases
    assert model.weight.detach().numpy() == pytest.approx(expected_w, rel=1e-10, abs=1e-12)
    assert model.bias.detach().numpy() == pytest.approx(expected_b, rel=1e-10, abs=1e-12)


def test_schedule_is_the_reference_warmup_then_linear_decay():
    s = PolyWarmup(1.0, training_steps=100, warmup_steps=10)
    assert [s.lr_at(i) for i in (0, 5, 10, 50, 100, 150)] == pytest.approx([0.0, 0.5, 0.9, 0.5, 0.0, 0.0])
    early = PolyWarmup(1.0, training_steps=100, warmup_steps=20, start_warmup_step=-10)  # warmup began before step 0
    assert early.lr_at(0) == pytest.approx(0.5) and early.lr_at(10) == pytest.approx(0.9)


def test_log_keys_are_those_the_closed_bert_rules_require():
    keys = Lamb(PolyWarmup(4.25e-4, 6700)).log_keys()
    for key in ("opt_base_learning_rate", "opt_lamb_epsilon", "opt_learning_rate_training_steps",
                "opt_learning_rate_warmup_steps", "num_warmup_steps", "start_warmup_step", "opt_lamb_beta_1",
                "opt_lamb_beta_2", "opt_lamb_weight_decay_rate", "opt_epsilon", "opt_lamb_learning_rate_decay_poly_power"):
        assert key in keys
    assert keys["opt_name"] == "lamb" and keys["opt_lamb_learning_rate_decay_poly_power"] == 1.0


def loop_reference() -> type[torch.optim.Optimizer]:
    """LambOptimizer as it was before the multi-tensor rewrite (a Python loop over tensors), the
    before-version benchmarks/lamb_step.py times: the reference the foreach step must reproduce."""
    spec = importlib.util.spec_from_file_location("lamb_loop", LOOP_REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LoopLambOptimizer


PerTensorLamb = loop_reference()


class MixedShapes(torch.nn.Module):
    """Every kind of tensor BERT and RNN-T give LAMB, and the trust ratio's edge cases: `zero` has
    zero weights (||w|| = 0) and `frozen` gets zero gradients in a group without decay (||update|| = 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.linear = torch.nn.Linear(6, 5)
        self.norm = torch.nn.LayerNorm(5)
        self.conv = torch.nn.Conv1d(5, 4, 3)
        self.scale = torch.nn.Parameter(torch.tensor(0.7))
        self.zero = torch.nn.Parameter(torch.zeros(4, 7))
        self.frozen = torch.nn.Parameter(torch.randn(3, 4))


def run_steps(optimizer_type, seed: int = 0, steps: int = 5, **kwargs) -> tuple[MixedShapes, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = MixedShapes()
    decayed = [p for n, p in model.named_parameters() if p.dim() >= 2 and n != "frozen"]
    others = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decayed, "weight_decay": 0.01}, {"params": others, "weight_decay": 0.0},
              {"params": [model.frozen], "weight_decay": 0.0, "lr": 0.5}]
    optimizer = optimizer_type(groups, lr=0.02, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, **kwargs)
    grads = torch.Generator().manual_seed(seed + 1)
    for step in range(steps):
        for name, p in model.named_parameters():
            p.grad = torch.randn(p.shape, generator=grads) * (10.0 ** (step % 3 - 1))
        model.frozen.grad.zero_()
        if step == 2:
            model.linear.bias.grad = None  # skipped this step: its own step count (bias correction) falls behind
        optimizer.param_groups[0]["lr"] = 0.02 * (1 - step / steps)  # as the loop sets the schedule's rate
        optimizer.step()
    return model, optimizer


@pytest.mark.parametrize("foreach", [None, False])
def test_the_multi_tensor_step_matches_the_per_tensor_loop(foreach):
    from trainclock.optim.lamb import LambOptimizer

    ours, ours_opt = run_steps(LambOptimizer, foreach=foreach)
    reference, reference_opt = run_steps(PerTensorLamb)
    for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-6, msg=lambda m: f"{name}: {m}")
        mine, theirs = ours_opt.state[p], reference_opt.state[q]
        assert mine["step"] == theirs["step"]
        torch.testing.assert_close(mine["m"], theirs["m"], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(mine["v"], theirs["v"], rtol=1e-6, atol=1e-6)
    # the edge cases moved as the ratio-1 rule says: a zero matrix leaves 0, a zero update stays put
    assert ours.zero.abs().sum() > 0 and torch.isfinite(ours.frozen).all()
    assert ours_opt.state[ours.linear.bias]["step"] == 4 and ours_opt.state[ours.linear.weight]["step"] == 5


def test_the_step_reads_nothing_back_to_the_host():
    """A read (`.item()`, `float(t)`, or `if norm > 0`) would make a GPU's host wait at every step."""
    from tests.host_reads import HostReads
    from trainclock.optim.lamb import LambOptimizer

    model, optimizer = run_steps(LambOptimizer, steps=1)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    with HostReads() as reads:
        optimizer.step()
        optimizer.step()
    assert reads.count == 0
    with HostReads() as reads:  # the check sees the kind of read it guards against
        bool(model.scale > 0)
    assert reads.count == 1
