"""The references' optimizers: ssd's Adam (weight decay 0) with a linear warmup from
warmup_factor x the base rate over the first epoch(s), then constant (a CPU tier may add step
decays the reference lacks, so its short curve flattens inside the budget); maskrcnn's SGD with momentum
0.9, a linear warmup over warmup_steps from warmup_factor, and two step decays of 0.1. Both log the
keys the closed rules of their benchmark ask for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.schedules import step_decay, step_decay_keys


def _warmup(step: int, steps: int, factor: float) -> float:
    if step >= steps:
        return 1.0
    alpha = step / steps
    return factor * (1 - alpha) + alpha  # the references' warmup_lr_scheduler


@dataclass(frozen=True)
class AdamWarmup:
    learning_rate: float
    warmup_epochs: float
    warmup_factor: float
    steps_per_epoch: float
    weight_decay: float = 0.0
    gradient_clip_norm: float | None = None
    decay_steps: tuple[int, ...] = ()  # none in the reference or the closed rules: CPU tiers only
    decay_factor: float = 0.1

    @property
    def warmup_steps(self) -> int:
        return round(self.warmup_epochs * self.steps_per_epoch)

    def build(self, model: nn.Module) -> torch.optim.Adam:
        params = [p for p in model.parameters() if p.requires_grad]  # frozen backbone stages stay out
        # fused: one kernel over all tensors, and its step counts stay tensors (foreach reads each on the host)
        return torch.optim.Adam(params, lr=self.lr_at(0), weight_decay=self.weight_decay, fused=True)

    def lr_at(self, step: int) -> float:
        decay = step_decay(step, self.decay_steps, self.decay_factor)
        return self.learning_rate * decay * _warmup(step, self.warmup_steps, self.warmup_factor)

    def log_keys(self) -> dict[str, Any]:
        keys = {"opt_name": "adam", "opt_base_learning_rate": self.learning_rate,
                "opt_weight_decay": self.weight_decay, "opt_learning_rate_warmup_epochs": self.warmup_epochs,
                "opt_learning_rate_warmup_factor": self.warmup_factor}
        return keys | step_decay_keys(self.decay_steps, self.decay_factor)  # what a tier added to the reference


@dataclass(frozen=True)
class SGDWarmupSteps:
    learning_rate: float
    warmup_steps: int
    warmup_factor: float
    decay_steps: tuple[int, int]
    momentum: float = 0.9
    weight_decay: float = 1e-4
    decay_factor: float = 0.1
    gradient_clip_norm: float | None = None

    def build(self, model: nn.Module) -> torch.optim.SGD:
        params = [p for p in model.parameters() if p.requires_grad]
        return torch.optim.SGD(params, lr=self.lr_at(0), momentum=self.momentum, weight_decay=self.weight_decay,
                               foreach=True)

    def lr_at(self, step: int) -> float:
        decay = step_decay(step, self.decay_steps, self.decay_factor)
        return self.learning_rate * decay * _warmup(step, self.warmup_steps, self.warmup_factor)

    def log_keys(self) -> dict[str, Any]:
        return {"opt_name": "sgd", "opt_base_learning_rate": self.learning_rate, "opt_momentum": self.momentum,
                "opt_weight_decay": self.weight_decay, "opt_learning_rate_warmup_steps": self.warmup_steps,
                "opt_learning_rate_warmup_factor": self.warmup_factor,
                "opt_learning_rate_decay_factor": self.decay_factor,
                "opt_learning_rate_decay_steps": list(self.decay_steps)}
