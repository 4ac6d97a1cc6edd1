"""optim/ema.WeightAverage, the weight average the Stable Diffusion tiers (the reference's LitEma
behind use_ema) and RNN-T (its apply_ema) evaluate: it follows LitEma's update step for step, or holds
its decay without the warm-up, an evaluation swaps it in and puts the weights back, a checkpoint
carries it once, and data parallelism leaves it alone."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainclock.distributed.parallelize import data_parallel_ignored
from trainclock.optim.ema import WeightAverage, average_buffers


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


def test_without_warmup_the_decay_holds_from_the_first_update():
    """RNN-T's average (the reference's apply_ema): ema = decay * ema + (1 - decay) * weight from the
    initial weights, no warm-up."""
    torch.manual_seed(0)
    net = nn.Linear(3, 2)
    average = WeightAverage(net, 0.9, warmup=False)
    expected = [p.detach().clone() for p in net.parameters()]
    for _ in range(5):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(torch.randn_like(p))
        average.update()
        expected = [0.9 * e + 0.1 * p.detach() for e, p in zip(expected, net.parameters())]
    for got, want in zip(average._shadows(), expected):
        torch.testing.assert_close(got, want)


def test_data_parallelism_leaves_every_average_unbroadcast():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
            self.ema = WeightAverage(self.net, 0.9)

    names = average_buffers(Holder())
    # the averages' own buffers only: BatchNorm's running statistics still follow rank 0
    assert sorted(names) == ["ema.shadow_0_bias", "ema.shadow_0_weight", "ema.shadow_1_bias", "ema.shadow_1_weight",
                             "ema.updates"]
    assert average_buffers(torch.compile(Holder())) == [f"_orig_mod.{n}" for n in names]
    # parallelize adds them to what a workload told DDP to leave before (dlrm's sharded tables)
    model = Holder()
    data_parallel_ignored(model, ["net.0.weight"])
    data_parallel_ignored(model, average_buffers(model))
    assert model._ddp_params_and_buffers_to_ignore == ["net.0.weight", *names]
