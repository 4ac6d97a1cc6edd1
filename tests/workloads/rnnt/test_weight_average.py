"""RNN-T's weight average (the reference's apply_ema, decay spec.ema from the initial weights): the
model keeps it (optim/ema.WeightAverage without warm-up), the optimizer steps it, a checkpoint carries
it, and the evaluation decodes with it and leaves the trained weights in place."""

from __future__ import annotations

import torch

from trainclock.optim.ema import averaged
from trainclock.workloads.rnnt.model import RNNT
from trainclock.workloads.rnnt.spec import get_member
from trainclock.workloads.rnnt.workload import rnnt_optimizer


def test_the_optimizer_steps_the_average_and_evaluation_decodes_with_it():
    spec = get_member("rnnt-tiny")
    torch.manual_seed(0)
    model = RNNT(spec.model, spec.ema)
    start = model.joint_enc.weight.detach().clone()
    opt = rnnt_optimizer(spec, steps_per_epoch=10).build(model)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    trained = model.joint_enc.weight.detach().clone()
    assert not torch.equal(trained, start) and model.ema.updates.item() == 1
    # no warm-up: one update moves the average (1 - decay) of the way from the initial weights
    torch.testing.assert_close(model.ema.shadow_joint_enc_weight, spec.ema * start + (1 - spec.ema) * trained)
    with averaged(model):
        torch.testing.assert_close(model.joint_enc.weight.detach(), model.ema.shadow_joint_enc_weight)
    torch.testing.assert_close(model.joint_enc.weight.detach(), trained)
    assert any(k.startswith("ema.shadow_") for k in model.state_dict())  # checkpoints carry it
    assert not any("ema" in str(k) for state in opt.state.values() for k in state)  # and only once
