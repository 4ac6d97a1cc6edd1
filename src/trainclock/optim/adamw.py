"""AdamW with decoupled weight decay on matrices only, under any schedule (e.g. warmup + cosine)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.base import Schedule, parameter_groups
from trainclock.optim.schedules import WarmupCosine


@dataclass(frozen=True)
class AdamW:
    schedule: Schedule
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    gradient_clip_norm: float | None = 1.0

    def build(self, model: nn.Module) -> torch.optim.AdamW:
        # The fused kernel (one pass over all parameters) exists for CPU and CUDA tensors alike.
        return torch.optim.AdamW(parameter_groups(model, self.weight_decay), lr=self.lr_at(0),
                                 betas=(self.beta1, self.beta2), eps=self.eps, fused=True)

    def lr_at(self, step: int) -> float:
        return self.schedule.lr_at(step)

    def log_keys(self) -> dict[str, Any]:
        keys: dict[str, Any] = {"opt_name": "adam"}
        keys.update(_schedule_keys(self.schedule))
        keys.update({"opt_adam_beta_1": self.beta1, "opt_adam_beta_2": self.beta2, "opt_adam_epsilon": self.eps,
                     "opt_weight_decay": self.weight_decay})
        if self.gradient_clip_norm is not None:
            keys["opt_gradient_clip_norm"] = self.gradient_clip_norm
        return keys


def _schedule_keys(schedule: Schedule) -> dict[str, Any]:
    if isinstance(schedule, WarmupCosine):
        return {"opt_base_learning_rate": schedule.learning_rate, "opt_end_learning_rate": schedule.end_learning_rate,
                "opt_learning_rate_warmup_steps": schedule.warmup_steps,
                "opt_learning_rate_decay_steps": schedule.decay_steps,
                "opt_learning_rate_decay_schedule": "cosine with linear warmup"}
    raise TypeError(f"no MLPerf keys for schedule {type(schedule).__name__}")
