"""The detection optimizers' rates: ssd's Adam warms up as the reference does and, on a CPU tier
only, steps down at the tier's decay steps (torch's MultiStepLR stepped per iteration); the full
size's closed log names no decay."""

from __future__ import annotations

import pytest
import torch

from trainclock.workloads.detection.optim import AdamWarmup, SGDWarmupSteps
from trainclock.workloads.detection.spec import get_member
from trainclock.workloads.detection.workload import optimizer


def _torch_rates(base: float, warmup_steps: int, factor: float, milestones: list[int], gamma: float,
                 steps: int) -> list[float]:
    """The reference's linear warmup from factor (torch's LinearLR) chained with MultiStepLR,
    both stepped per iteration."""
    opt = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=base)
    schedulers = [torch.optim.lr_scheduler.LinearLR(opt, factor, 1.0, warmup_steps)]
    if milestones:
        schedulers.append(torch.optim.lr_scheduler.MultiStepLR(opt, milestones, gamma))
    chained = torch.optim.lr_scheduler.ChainedScheduler(schedulers)
    rates = []
    for _ in range(steps):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        chained.step()
    return rates


@pytest.mark.parametrize("decays", [(), (30, 36)])
def test_adam_rate_per_step_matches_torch_schedulers(decays):
    adam = AdamWarmup(1e-3, warmup_epochs=0.5, warmup_factor=1e-3, steps_per_epoch=20, decay_steps=decays)
    ours = [adam.lr_at(step) for step in range(40)]
    assert ours == pytest.approx(_torch_rates(1e-3, 10, 1e-3, list(decays), 0.1, 40), rel=1e-9)
    if decays:
        assert ours[-1] == pytest.approx(1e-5)
        assert adam.log_keys()["opt_learning_rate_decay_steps"] == [30, 36]
    else:
        assert "opt_learning_rate_decay_steps" not in adam.log_keys()


def test_full_size_ssd_logs_the_references_schedule_only():
    spec = get_member("retinanet-resnext50", "ssd")
    adam = optimizer(spec, spec.train_images)
    assert isinstance(adam, AdamWarmup) and adam.decay_steps == ()
    assert adam.lr_at(10 ** 6) == spec.learning_rate  # constant after the warmup, as the reference
    assert not any("decay" in key for key in adam.log_keys() if key != "opt_weight_decay")


def test_maskrcnn_decays_twice_by_a_tenth():
    sgd = SGDWarmupSteps(0.04, warmup_steps=5, warmup_factor=1e-3, decay_steps=(20, 30))
    assert [sgd.lr_at(s) for s in (19, 20, 29, 30)] == pytest.approx([0.04, 0.004, 0.004, 0.0004])
