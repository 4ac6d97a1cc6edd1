"""The UNet's weight average (optim/ema.WeightAverage, the reference's LitEma behind use_ema) as the
tiers use it: it follows LitEma's update step for step, an evaluation swaps it in and puts the weights
back, a checkpoint carries it, the optimizer steps it, and sharded or cut layouts are refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.optim.ema import WeightAverage
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion.model import Conditioned
from trainclock.workloads.stable_diffusion.spec import get_member
from trainclock.workloads.stable_diffusion import WORKLOAD
from trainclock.workloads.stable_diffusion.workload import optimizer, text_config


def _lit_ema_steps(start: list[torch.Tensor], weights: list[list[torch.Tensor]], decay: float) -> list[torch.Tensor]:
    """ldm/modules/ema.py LitEma.forward, written out: num_updates counts from 1."""
    shadow = [s.clone() for s in start]
    for n, step_weights in enumerate(weights, start=1):
        d = min(decay, (1 + n) / (10 + n))
        shadow = [s - (1 - d) * (s - w) for s, w in zip(shadow, step_weights)]
    return shadow


def test_the_average_follows_lit_ema_step_for_step():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    net[1].bias.requires_grad_(False)  # frozen weights are not averaged, as LitEma skips them
    average = WeightAverage(net, 0.9)
    tracked = [p for p in net.parameters() if p.requires_grad]
    start = [p.detach().clone() for p in tracked]
    seen = []
    for _ in range(100):  # through the warm-up and past it: (1 + n) / (10 + n) reaches 0.9 at update 80
        with torch.no_grad():
            for p in tracked:
                p.add_(torch.randn_like(p))
        average.update()
        seen.append([p.detach().clone() for p in tracked])
    expected = _lit_ema_steps(start, seen, 0.9)
    for got, want in zip(average._shadows(), expected):
        torch.testing.assert_close(got, want)
    assert len(average._shadows()) == 3 and average.updates.item() == 100


def test_swapped_puts_the_average_in_and_the_weights_back_even_on_error():
    net = nn.Linear(3, 3)
    average = WeightAverage(net, 0.5)
    own = net.weight.detach().clone()
    with torch.no_grad():
        net.weight.add_(1.0)
    moved = net.weight.detach().clone()
    with average.swapped():
        torch.testing.assert_close(net.weight.detach(), own)
    torch.testing.assert_close(net.weight.detach(), moved)
    with pytest.raises(RuntimeError, match="inside"):
        with average.swapped():
            raise RuntimeError("inside")
    torch.testing.assert_close(net.weight.detach(), moved)


def test_the_average_is_saved_once_beside_the_weights_and_loads_back():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(2, 2)
            self.ema = WeightAverage(self.net, 0.9)

    a, b = Holder(), Holder()
    with torch.no_grad():
        a.net.weight.mul_(3)
    a.ema.update()
    state = a.state_dict()
    assert sorted(state) == ["ema.shadow_bias", "ema.shadow_weight", "ema.updates", "net.bias", "net.weight"]
    b.load_state_dict(state)
    assert b.ema.updates.item() == 1
    torch.testing.assert_close(b.ema.shadow_weight, a.ema.shadow_weight)


def test_a_decay_outside_zero_one_is_refused():
    for decay in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="decay"):
            WeightAverage(nn.Linear(2, 2), decay)


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
    with model.averaged():
        shadow = model.ema.shadow_conv_in_weight
        torch.testing.assert_close(model.unet.conv_in.weight.detach(), shadow)
        assert not torch.equal(model.unet.conv_in.weight, trained)
    torch.testing.assert_close(model.unet.conv_in.weight.detach(), trained)
    plain = _tiny_model(None)  # no average (the full size, as MLPerf's configs set use_ema False)
    assert plain.ema is None and not any("shadow" in k for k in plain.state_dict())
    with plain.averaged():
        pass


def test_an_averaging_tier_refuses_sharded_and_cut_layouts():
    spec = dataclasses.replace(get_member("sd-tiny"), ema_decay=0.99)
    for layout in (Layout(dp=2, fsdp=True), Layout(tp=2), Layout(pp=2)):
        with pytest.raises(UsageError, match="averages its weights"):
            WORKLOAD.check_run(spec, RunSettings(), layout, torch.device("cpu"))
    WORKLOAD.check_run(spec, RunSettings(), Layout(dp=2), torch.device("cpu"))
