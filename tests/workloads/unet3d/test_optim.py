"""The unet3d optimizer's rate follows the reference's schedule: lr_warmup by epoch, then the base
rate, multiplied at each decay boundary as the reference's MultiStepLR stepped after each epoch."""

from __future__ import annotations

import pytest
import torch

from trainclock.workloads.unet3d.optim import NesterovWarmup


def _reference_rates(base: float, init: float, warmup: int, boundaries: list[int], factor: float,
                     epochs: int) -> list[float]:
    """The reference's loop (runtime/training.py): lr_warmup at the start of each warmup epoch,
    MultiStepLR.step() at each epoch's end; the rate each epoch trains with."""
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=base)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=boundaries, gamma=factor) if boundaries else None
    rates = []
    for epoch in range(1, epochs + 1):
        if epoch <= warmup:
            for group in optimizer.param_groups:
                group["lr"] = init + (base - init) * epoch / warmup
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return rates


@pytest.mark.parametrize("boundaries,factor", [((), 1.0), ((6, 9), 0.3)])
def test_rate_per_epoch_matches_the_reference_loop(boundaries, factor):
    schedule = NesterovWarmup(0.5, 1e-4, 2, samples_per_epoch=24, global_batch_size=4,
                              decay_boundary_epochs=boundaries, decay_factor=factor)
    steps_per_epoch = 24 // 4
    ours = [schedule.lr_at(epoch * steps_per_epoch) for epoch in range(12)]
    assert ours == pytest.approx(_reference_rates(0.5, 1e-4, 2, list(boundaries), factor, 12))
    assert all(schedule.lr_at(e * steps_per_epoch + steps_per_epoch - 1) == pytest.approx(r)
               for e, r in enumerate(ours))  # constant within an epoch
    keys = schedule.log_keys()
    assert keys["opt_learning_rate_decay_boundary_epochs"] == list(boundaries)
    assert keys["opt_learning_rate_decay_factor"] == factor
