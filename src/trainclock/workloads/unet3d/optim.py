"""The reference's optimizer (runtime/training.py): SGD with Nesterov momentum and a linear warmup
by epoch from the initial rate to the base rate (lr_warmup: at epoch e of the warmup, init +
(base - init) * e / warmup_epochs), then constant, or multiplied by the decay factor at each decay
boundary epoch (the reference's --lr_decay_epochs / --lr_decay_factor, a MultiStepLR stepped at
each epoch's end; the closed entries use none), logged with the unet3d rules' opt_* keys rather
than resnet's sgd_* ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.schedules import step_decay


@dataclass(frozen=True)
class NesterovWarmup:
    learning_rate: float
    initial_learning_rate: float
    warmup_epochs: int
    samples_per_epoch: int
    global_batch_size: int
    momentum: float = 0.9
    weight_decay: float = 0.0
    gradient_clip_norm: float | None = None
    decay_boundary_epochs: tuple[int, ...] = ()
    decay_factor: float = 1.0

    def build(self, model: nn.Module) -> torch.optim.SGD:
        # foreach: one multi-tensor kernel instead of a loop over the 100-odd parameters
        return torch.optim.SGD(model.parameters(), lr=self.lr_at(0), momentum=self.momentum, nesterov=True,
                               weight_decay=self.weight_decay, foreach=True)

    def lr_at(self, step: int) -> float:
        epoch = step * self.global_batch_size // self.samples_per_epoch + 1  # 1-based, as the reference counts
        if self.warmup_epochs <= 0 or epoch > self.warmup_epochs:
            # MultiStepLR stepped after each epoch: epoch e runs with the boundaries its e - 1 done epochs passed
            return self.learning_rate * step_decay(epoch - 1, self.decay_boundary_epochs, self.decay_factor)
        return self.initial_learning_rate + (self.learning_rate - self.initial_learning_rate) * epoch / self.warmup_epochs

    def log_keys(self) -> dict[str, Any]:
        return {
            "opt_name": "sgd",
            "opt_base_learning_rate": self.learning_rate,
            "opt_initial_learning_rate": self.initial_learning_rate,
            "opt_learning_rate_warmup_epochs": self.warmup_epochs,
            "opt_learning_rate_decay_boundary_epochs": list(self.decay_boundary_epochs),
            "opt_learning_rate_decay_factor": self.decay_factor,
            "opt_weight_decay": self.weight_decay,
            "opt_momentum": self.momentum,
        }
