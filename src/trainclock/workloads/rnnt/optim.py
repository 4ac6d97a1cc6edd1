"""The reference's optimizer (train.py, common/optimizers.py): LAMB (eps 1e-9, weight decay 1e-3,
global gradient norm clipped to 1) with its rate: a linear warmup ((step+1)/(warmup_steps+1)),
a hold at the base rate, then an exponential decay by epoch (gamma ** (epoch - warmup - hold)),
never below 1e-5. The reference's moving average of the weights is the model's own
(optim/ema.WeightAverage, RNNT's `ema`): the optimizer this builds updates it after every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from trainclock.optim.base import parameter_groups
from trainclock.optim.ema import followed
from trainclock.optim.lamb import LambOptimizer


@dataclass(frozen=True)
class RnntLamb:
    learning_rate: float
    steps_per_epoch: int
    warmup_epochs: float
    hold_epochs: float
    exp_gamma: float
    min_learning_rate: float = 1e-5
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-9
    weight_decay: float = 1e-3
    gradient_clip_norm: float | None = 1.0

    def build(self, model: nn.Module) -> LambOptimizer:
        optimizer = LambOptimizer(parameter_groups(model, self.weight_decay), lr=self.lr_at(0),
                                  betas=(self.beta1, self.beta2), eps=self.eps, weight_decay=self.weight_decay)
        return followed(model, optimizer)

    def lr_at(self, step: int) -> float:
        warmup = self.warmup_epochs * self.steps_per_epoch
        if step < warmup:
            factor = (step + 1) / (warmup + 1)
        elif step < warmup + self.hold_epochs * self.steps_per_epoch:
            factor = 1.0
        else:
            factor = self.exp_gamma ** (step // self.steps_per_epoch - self.warmup_epochs - self.hold_epochs)
        return max(factor * self.learning_rate, self.min_learning_rate)

    def log_keys(self) -> dict[str, Any]:
        return {
            "opt_name": "lamb",
            "opt_base_learning_rate": self.learning_rate,
            "opt_lamb_epsilon": self.eps,
            "opt_lamb_learning_rate_decay_poly_power": self.exp_gamma,
            "opt_learning_rate_warmup_epochs": self.warmup_epochs,
            "opt_lamb_learning_rate_hold_epochs": self.hold_epochs,
            "opt_lamb_beta_1": self.beta1,
            "opt_lamb_beta_2": self.beta2,
            "opt_gradient_clip_norm": self.gradient_clip_norm if self.gradient_clip_norm is not None else float("inf"),
            "opt_learning_rate_alt_decay_func": True,
            "opt_learning_rate_alt_warmup_func": True,
            "opt_lamb_learning_rate_min": self.min_learning_rate,
            "opt_weight_decay": self.weight_decay,
        }
