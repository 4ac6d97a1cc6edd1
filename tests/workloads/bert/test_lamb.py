"""LAMB against a direct transcription of the reference's update (TF LAMBOptimizer in MLPerf's
bert: bias-corrected Adam step, decay added, trust ratio ||w|| / ||update|| on matrices only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainclock.optim.lamb import Lamb, PolyWarmup


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
