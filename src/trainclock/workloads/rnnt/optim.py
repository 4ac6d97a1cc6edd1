"""The reference's optimizer (train.py, common/optimizers.py): LAMB (eps 1e-9, weight decay 1e-3,
global gradient norm clipped to 1) with its rate: a linear warmup ((step+1)/(warmup_steps+1)),
a hold at the base rate, then an exponential decay by epoch (gamma ** (epoch - warmup - hold)),
never below 1e-5; and an exponential moving average of the weights (0.999 per step, from the
initial weights) that the evaluation decodes with. The average lives in the optimizer's state, so
checkpoints carry it and --resume restores it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainclock.optim.base import parameter_groups
from trainclock.optim.lamb import LambOptimizer


class EmaLamb(LambOptimizer):
    def __init__(self, params, ema: float, **kwargs) -> None:
        super().__init__(params, **kwargs)
        self.ema = ema

    @torch.no_grad()
    def step(self, closure=None):
        params = [p for group in self.param_groups for p in group["params"]]
        # the average starts at the weights before the first step (LAMB fills the state only then)
        start = {p: p.detach().clone() for p in params if "ema" not in self.state[p]}
        super().step(closure)
        for p in params:
            self.state[p].setdefault("ema", start.get(p, p.detach())).lerp_(p.detach(), 1 - self.ema)


@dataclass
class Built:
    optimizer: EmaLamb | None = None


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
    ema: float = 0.999
    gradient_clip_norm: float | None = 1.0
    built: Built = field(default_factory=Built, compare=False, repr=False)

    def build(self, model: nn.Module) -> EmaLamb:
        optimizer = EmaLamb(parameter_groups(model, self.weight_decay), ema=self.ema, lr=self.lr_at(0),
                            betas=(self.beta1, self.beta2), eps=self.eps, weight_decay=self.weight_decay)
        self.built.optimizer = optimizer
        return optimizer

    def lr_at(self, step: int) -> float:
        warmup = self.warmup_epochs * self.steps_per_epoch
        if step < warmup:
            factor = (step + 1) / (warmup + 1)
        elif step < warmup + self.hold_epochs * self.steps_per_epoch:
            factor = 1.0
        else:
            factor = self.exp_gamma ** (step // self.steps_per_epoch - self.warmup_epochs - self.hold_epochs)
        return max(factor * self.learning_rate, self.min_learning_rate)

    def averaged(self, model: nn.Module) -> nn.Module:
        """A copy of `model` (unwrapped) holding the moving average of its weights."""
        net = getattr(model, "module", model)
        copied = copy.deepcopy(net)
        state = self.built.optimizer.state if self.built.optimizer is not None else {}
        with torch.no_grad():
            for mine, theirs in zip(copied.parameters(), net.parameters()):
                if theirs in state and "ema" in state[theirs]:
                    mine.copy_(state[theirs]["ema"])
        return copied.eval()

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
