"""Learning-rate schedules of the MLPerf reference implementations, as functions of the step."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WarmupCosine:
    """Linear warmup to the base rate over warmup_steps, then cosine decay to the end rate at
    decay_steps (counted from step 0, warmup included, as the MLPerf reference using it counts),
    then flat."""

    learning_rate: float
    end_learning_rate: float
    warmup_steps: int
    decay_steps: int

    def lr_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        span = max(self.decay_steps - self.warmup_steps, 1)
        progress = min((step - self.warmup_steps) / span, 1.0)
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return self.end_learning_rate + (self.learning_rate - self.end_learning_rate) * cosine


@dataclass(frozen=True)
class WarmupPoly:
    """Linear warmup, then polynomial decay to the end rate at decay_steps (counted after the
    warmup, as the MLPerf reference using it counts), then flat."""

    learning_rate: float
    end_learning_rate: float
    warmup_steps: int
    decay_steps: int
    power: float = 2.0

    def lr_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        progress = min((step - self.warmup_steps) / max(self.decay_steps, 1), 1.0)
        return self.end_learning_rate + (self.learning_rate - self.end_learning_rate) * (1 - progress) ** self.power


def step_decay(step: int, boundaries: Sequence[int], factor: float) -> float:
    """The multiplier of a step decay stepped per iteration (torch's MultiStepLR): factor once for
    every boundary reached."""
    return factor ** sum(step >= b for b in boundaries)


def step_decay_keys(boundaries: Sequence[int], factor: float) -> dict[str, object]:
    """The log keys of a CPU tier's step decays; none where the schedule has none, as the
    references whose closed rules name no decay log."""
    if not boundaries:
        return {}
    return {"opt_learning_rate_decay_steps": list(boundaries), "opt_learning_rate_decay_factor": factor}
