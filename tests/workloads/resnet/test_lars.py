"""LARS as MLPerf's closed resnet uses it: one step computed by hand (trust ratio
eta*||w||/(||g||+wd*||w||), momentum as lr-scaled velocity), biases and batch-norm parameters left
to plain momentum without decay, and the rules' lars_* keys in the log with their fixed values."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainclock.optim.lars import Lars, LarsOptimizer
from trainclock.optim.schedules import WarmupPoly


def test_one_step_matches_the_formula():
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(4, 3))
    b = nn.Parameter(torch.randn(4))
    w.grad, b.grad = torch.randn(4, 3), torch.randn(4)
    w0, b0, gw, gb = w.detach().clone(), b.detach().clone(), w.grad.clone(), b.grad.clone()
    lr, wd, eta, m = 2.0, 1e-3, 0.001, 0.9
    opt = LarsOptimizer([{"params": [w], "weight_decay": wd, "lars": True},
                         {"params": [b], "weight_decay": 0.0, "lars": False}], lr=lr, momentum=m, eta=eta)
    opt.step()
    trust = eta * w0.norm() / (gw.norm() + wd * w0.norm())
    v = lr * trust * (gw + wd * w0)
    assert torch.allclose(w.detach(), w0 - v, atol=1e-7)
    assert torch.allclose(b.detach(), b0 - lr * gb, atol=1e-7)
    w.grad, b.grad = gw.clone(), gb.clone()  # a second step: the velocity carries momentum
    w1 = w.detach().clone()
    opt.step()
    trust1 = eta * w1.norm() / (gw.norm() + wd * w1.norm())
    assert torch.allclose(w.detach(), w1 - (m * v + lr * trust1 * (gw + wd * w1)), atol=1e-6)


def test_a_zero_weight_takes_the_plain_gradient_step():
    w = nn.Parameter(torch.zeros(3, 3))
    w.grad = torch.ones(3, 3)
    LarsOptimizer([{"params": [w], "weight_decay": 0.0, "lars": True}], lr=0.5, momentum=0.0).step()
    assert torch.allclose(w.detach(), torch.full((3, 3), -0.5))


def test_setup_adapts_kernels_only_and_logs_the_rules_keys():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Flatten(), nn.Linear(8, 2))
    setup = Lars(WarmupPoly(10.5, 0.0001, warmup_steps=785, decay_steps=14523, power=2.0), warmup_epochs=2,
                 weight_decay=5e-5)
    optimizer = setup.build(model)
    adapted = {id(p) for g in optimizer.param_groups if g["lars"] for p in g["params"]}
    assert adapted == {id(model[0].weight), id(model[3].weight)}
    assert all(g["weight_decay"] == 0 for g in optimizer.param_groups if not g["lars"])
    keys = setup.log_keys()
    assert keys["opt_name"] == "lars" and keys["lars_epsilon"] == 0.0
    assert keys["lars_opt_end_learning_rate"] == 0.0001 and keys["lars_opt_learning_rate_decay_poly_power"] == 2
    assert keys["lars_opt_learning_rate_warmup_epochs"] == 2 and keys["lars_opt_weight_decay"] == 5e-5
    assert setup.lr_at(0) == pytest.approx(10.5 / 785) and setup.lr_at(785 + 14523) == pytest.approx(0.0001)
