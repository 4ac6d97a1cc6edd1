"""LAMB (You et al. 2019) as MLPerf's bert reference runs it (TF LAMBOptimizer, NVIDIA FusedLAMB):
Adam moments with bias correction, decoupled weight decay added to the update, then a per-tensor
trust ratio ||w|| / ||update||; biases and LayerNorm weights get neither decay nor the ratio.
The schedule is the reference's: linear warmup from start_warmup_step, polynomial decay to 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.base import parameter_groups


class LambOptimizer(torch.optim.Optimizer):
    def __init__(self, params, lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                state["step"] += 1
                m, v, t = state["m"], state["v"], state["step"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + group["eps"])
                ratio = 1.0
                if p.dim() >= 2:  # matrices only: biases and LayerNorm weights are excluded, as in the reference
                    update.add_(p, alpha=group["weight_decay"])
                    w_norm, u_norm = p.norm(), update.norm()
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                p.sub_(update * (ratio * group["lr"]))


@dataclass(frozen=True)
class PolyWarmup:
    """The bert reference's rate: lr * (1 - min(step, training_steps) / training_steps) ** power, and
    during warmup (step - start_warmup_step < warmup_steps) lr * (step - start_warmup_step) / warmup_steps.
    A negative start_warmup_step (some reference sets) means the warmup began before step 0."""

    learning_rate: float
    training_steps: int
    warmup_steps: int = 0
    start_warmup_step: int = 0
    power: float = 1.0

    def lr_at(self, step: int) -> float:
        since = step - self.start_warmup_step
        if self.warmup_steps > 0 and since < self.warmup_steps:
            return self.learning_rate * since / self.warmup_steps
        left = 1 - min(step, self.training_steps) / self.training_steps
        return self.learning_rate * left ** self.power


@dataclass(frozen=True)
class Lamb:
    schedule: PolyWarmup
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-6
    weight_decay: float = 0.01
    gradient_clip_norm: float | None = 1.0  # the reference clips the global norm before LAMB

    def build(self, model: nn.Module) -> LambOptimizer:
        return LambOptimizer(parameter_groups(model, self.weight_decay), lr=self.lr_at(0),
                             betas=(self.beta1, self.beta2), eps=self.eps, weight_decay=self.weight_decay)

    def lr_at(self, step: int) -> float:
        return self.schedule.lr_at(step)

    def log_keys(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "opt_name": "lamb",
            "opt_base_learning_rate": s.learning_rate,
            "opt_lamb_epsilon": self.eps,
            "opt_epsilon": self.eps,
            "opt_lamb_beta_1": self.beta1,
            "opt_lamb_beta_2": self.beta2,
            "opt_lamb_weight_decay_rate": self.weight_decay,
            "opt_learning_rate_training_steps": s.training_steps,
            "opt_learning_rate_warmup_steps": s.warmup_steps,
            "num_warmup_steps": s.warmup_steps,
            "start_warmup_step": s.start_warmup_step,
            "opt_lamb_learning_rate_decay_poly_power": s.power,
        }
