"""SGD with momentum, warmup and polynomial decay, logged with the MLPerf rules' `sgd_*` keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.base import parameter_groups
from trainclock.optim.schedules import WarmupPoly


@dataclass(frozen=True)
class SGDMomentum:
    schedule: WarmupPoly
    momentum: float = 0.9
    weight_decay: float = 5e-5
    nesterov: bool = False
    warmup_epochs: float | None = None  # logged as opt_learning_rate_warmup_epochs where the rules count epochs
    gradient_clip_norm: float | None = None

    def build(self, model: nn.Module) -> torch.optim.SGD:
        # foreach: one multi-tensor kernel per group instead of a loop over parameters
        return torch.optim.SGD(parameter_groups(model, self.weight_decay), lr=self.lr_at(0), momentum=self.momentum,
                               nesterov=self.nesterov, foreach=True)

    def lr_at(self, step: int) -> float:
        return self.schedule.lr_at(step)

    def log_keys(self) -> dict[str, Any]:
        s = self.schedule
        keys: dict[str, Any] = {
            "opt_name": "sgd",
            "sgd_opt_base_learning_rate": s.learning_rate,
            "sgd_opt_end_learning_rate": s.end_learning_rate,
            "sgd_opt_learning_rate_decay_poly_power": s.power,
            "sgd_opt_learning_rate_decay_steps": s.decay_steps,
            "sgd_opt_weight_decay": self.weight_decay,
            "sgd_opt_momentum": self.momentum,
            "opt_learning_rate_warmup_steps": s.warmup_steps,
        }
        if self.warmup_epochs is not None:
            keys["opt_learning_rate_warmup_epochs"] = self.warmup_epochs
        if self.gradient_clip_norm is not None:
            keys["opt_gradient_clip_norm"] = self.gradient_clip_norm
        return keys
