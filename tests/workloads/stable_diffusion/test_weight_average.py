"""The UNet's weight average (optim/ema.WeightAverage, the reference's LitEma behind use_ema; its own
tests are tests/test_weight_average.py) as the tiers use it: the optimizer steps it, evaluation reads
it, and sharded or cut layouts are refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.optim.ema import averaged
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion.model import Conditioned
from trainclock.workloads.stable_diffusion.spec import get_member
from trainclock.workloads.stable_diffusion import WORKLOAD
from trainclock.workloads.stable_diffusion.workload import optimizer, text_config


def _tiny_model(ema_decay: float | None) -> Conditioned:
    from transformers import CLIPTextModel

    spec = get_member("sd-tiny")
    torch.manual_seed(0)
    return Conditioned(spec.unet.build(), CLIPTextModel(text_config(spec)), ema_decay)


def test_the_optimizer_steps_the_tiers_average_and_evaluation_reads_it():
    spec = dataclasses.replace(get_member("sd-tiny"), ema_decay=0.99)
    model = _tiny_model(spec.ema_decay)
    opt = optimizer(spec).build(model)
    before = [s.clone() for s in model.ema._shadows()]
    model.unet.conv_in.weight.grad = torch.ones_like(model.unet.conv_in.weight)
    opt.step()
    assert model.ema.updates.item() == 1
    moved = [not torch.equal(a, b) for a, b in zip(before, model.ema._shadows())]
    assert moved[model.ema.names.index("conv_in.weight")]
    trained = model.unet.conv_in.weight.detach().clone()
    with averaged(model):
        shadow = model.ema.shadow_conv_in_weight
        torch.testing.assert_close(model.unet.conv_in.weight.detach(), shadow)
        assert not torch.equal(model.unet.conv_in.weight, trained)
    torch.testing.assert_close(model.unet.conv_in.weight.detach(), trained)
    plain = _tiny_model(None)  # no average (the full size, as MLPerf's configs set use_ema False)
    assert plain.ema is None and not any("shadow" in k for k in plain.state_dict())
    with averaged(plain):
        pass


def test_an_averaging_tier_refuses_sharded_and_cut_layouts():
    spec = dataclasses.replace(get_member("sd-tiny"), ema_decay=0.99)
    for layout in (Layout(dp=2, fsdp=True), Layout(tp=2), Layout(pp=2)):
        with pytest.raises(UsageError, match="averages its weights"):
            WORKLOAD.check_run(spec, RunSettings(), layout, torch.device("cpu"))
    WORKLOAD.check_run(spec, RunSettings(), Layout(dp=2), torch.device("cpu"))
