"""LARS (You, Gitman and Ginsburg 2017) as the MLPerf closed rules that use it define it, logged
with the rules' `lars_*` keys. For each weight with decay (convolutions and the classifier's
matrix) the update is scaled by a layer-wise trust ratio eta * ||w|| / (||g|| + wd * ||w|| + eps);
biases and batch-norm parameters take plain momentum SGD without decay (the reference skips them:
their norms are not meaningful). Momentum as the MLPerf reference's: v = m * v + lr * scaled gradient; w -= v.
The rules fix eps at 0.0, the end learning rate at 0.0001 and the poly power at 2."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.base import parameter_groups
from trainclock.optim.schedules import WarmupPoly


class LarsOptimizer(torch.optim.Optimizer):
    """Param groups carry weight_decay and `lars` (adapt this group's rate, or plain momentum)."""

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 5e-5, eta: float = 0.001,
                 eps: float = 0.0) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0 or eta <= 0 or eps < 0:
            raise ValueError("LARS hyperparameters must be non-negative (eta positive)")
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, eta=eta, eps=eps, lars=True))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            wd, lr = group["weight_decay"], group["lr"]
            if group["lars"]:
                w_norms = torch._foreach_norm(params)
                g_norms = torch._foreach_norm(grads)
                grads = torch._foreach_add(grads, params, alpha=wd) if wd else [g.clone() for g in grads]
                for g, w_norm, g_norm in zip(grads, w_norms, g_norms):
                    denominator = g_norm + wd * w_norm + group["eps"]
                    # a zero weight or gradient norm (fresh zero-initialised layer): no adaptation
                    trust = torch.where((w_norm > 0) & (denominator > 0),
                                        group["eta"] * w_norm / denominator.clamp(min=1e-30), torch.ones_like(w_norm))
                    g.mul_(trust)
            elif wd:
                grads = torch._foreach_add(grads, params, alpha=wd)
            velocities = []
            for p in params:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                velocities.append(state["momentum_buffer"])
            torch._foreach_mul_(velocities, group["momentum"])
            torch._foreach_add_(velocities, grads, alpha=lr)
            torch._foreach_sub_(params, velocities)
        return loss


@dataclass(frozen=True)
class Lars:
    """The optimizer setup a workload declares (see trainclock.optim.base.OptimizerSetup)."""

    schedule: WarmupPoly
    warmup_epochs: float
    momentum: float = 0.9
    weight_decay: float = 5e-5
    eta: float = 0.001
    epsilon: float = 0.0
    gradient_clip_norm: float | None = None

    def build(self, model: nn.Module) -> LarsOptimizer:
        groups = parameter_groups(model, self.weight_decay)
        for group in groups:  # matrices and kernels are adapted; biases and batch-norm parameters are not
            group["lars"] = group["params"][0].dim() >= 2
        return LarsOptimizer(groups, lr=self.lr_at(0), momentum=self.momentum, weight_decay=self.weight_decay,
                             eta=self.eta, eps=self.epsilon)

    def lr_at(self, step: int) -> float:
        return self.schedule.lr_at(step)

    def log_keys(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "opt_name": "lars",
            "lars_opt_base_learning_rate": s.learning_rate,
            "lars_opt_end_learning_rate": s.end_learning_rate,
            "lars_opt_learning_rate_decay_poly_power": s.power,
            "lars_opt_learning_rate_decay_steps": s.decay_steps,
            "lars_epsilon": self.epsilon,
            "lars_opt_learning_rate_warmup_epochs": self.warmup_epochs,
            "lars_opt_momentum": self.momentum,
            "lars_opt_weight_decay": self.weight_decay,
            "opt_learning_rate_warmup_steps": s.warmup_steps,
        }
