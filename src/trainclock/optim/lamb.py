"""LAMB (You et al. 2019) as the MLPerf reference implementation runs it (TF LAMBOptimizer,
NVIDIA FusedLAMB): Adam moments with bias correction, decoupled weight decay added to the update,
then a per-tensor trust ratio ||w|| / ||update||; biases and LayerNorm weights get neither decay
nor the ratio. The schedule is the reference's: linear warmup from start_warmup_step, polynomial decay to 0.

The step updates all tensors of a kind (tensor type, device, dtype) at once with torch._foreach_*
ops: a large transformer has hundreds of parameter tensors, and a Python loop of ten small ops on
each costs more than the arithmetic on a GPU. Nothing in it reads a tensor back to the host."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.base import parameter_groups


class LambOptimizer(torch.optim.Optimizer):
    """foreach (default on): one multi-tensor update per tensor kind; False updates one tensor at a
    time with the same code, keeping the transient memory at one tensor's update instead of two
    copies of every parameter (the foreach step's update and denominator)."""

    def __init__(self, params, lr: float, betas: tuple[float, float], eps: float, weight_decay: float,
                 foreach: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        # an attribute, not a group default: checkpoints keep the param-group keys they had
        self.foreach = foreach is not False

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            # foreach kernels take one tensor type, device and dtype per call (DTensor parameters apart)
            kinds: dict[tuple, tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor],
                                     list[float], list[float]]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                # a host int, as before (checkpoints carry it): bias corrections are host floats, no read
                state["step"] += 1
                t = state["step"]
                params, grads, ms, vs, bc1, bc2 = kinds.setdefault((type(p), p.device, p.dtype),
                                                                   ([], [], [], [], [], []))
                params.append(p)
                grads.append(p.grad)
                ms.append(state["m"])
                vs.append(state["v"])
                bc1.append(1 - beta1 ** t)
                bc2.append(1 - beta2 ** t)
            for params, grads, ms, vs, bc1, bc2 in kinds.values():
                if self.foreach:
                    lamb_update(params, grads, ms, vs, bc1, bc2, group)
                else:
                    for one in zip(params, grads, ms, vs, bc1, bc2):
                        lamb_update(*([x] for x in one), group)
        return loss


def lamb_update(params: list[torch.Tensor], grads: list[torch.Tensor], ms: list[torch.Tensor],
                vs: list[torch.Tensor], bc1: list[float], bc2: list[float], group: dict[str, Any]) -> None:
    """One LAMB step on tensors of one kind, in place, in the per-tensor form's order of operations
    (its last multiply and subtract fused):
    update = (m / bc1) / (sqrt(v / bc2) + eps); on matrices update += wd * w and the update is
    scaled by ||w|| / ||update|| (1 where either norm is 0); w -= lr * ratio * update."""
    beta1, beta2 = group["betas"]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    torch._foreach_mul_(ms, beta1)
    torch._foreach_add_(ms, grads, alpha=1 - beta1)
    torch._foreach_mul_(vs, beta2)
    torch._foreach_addcmul_(vs, grads, grads, value=1 - beta2)
    denominators = torch._foreach_div(vs, bc2)
    torch._foreach_sqrt_(denominators)
    torch._foreach_add_(denominators, eps)
    updates = torch._foreach_div(ms, bc1)
    torch._foreach_div_(updates, denominators)
    del denominators  # the step's transient peak is these and the updates: two copies of the parameters
    # matrices only: biases and LayerNorm weights are excluded, as in the reference (a shape, not a value)
    matrices = [i for i, p in enumerate(params) if p.dim() >= 2]
    others = [i for i, p in enumerate(params) if p.dim() < 2]
    # w -= (lr * ratio) * update as one pass over the weights, not a scaling pass then a subtraction
    if matrices:
        weights, scaled = [params[i] for i in matrices], [updates[i] for i in matrices]
        torch._foreach_add_(scaled, weights, alpha=wd)
        rates = trust_ratios(torch._foreach_norm(weights), torch._foreach_norm(scaled), lr)
        torch._foreach_addcmul_(weights, scaled, rates, value=-1)
    if others:
        torch._foreach_add_([params[i] for i in others], [updates[i] for i in others], alpha=-lr)


def trust_ratios(w_norms: list[torch.Tensor], u_norms: list[torch.Tensor], lr: float) -> list[torch.Tensor]:
    """lr * ||w|| / ||update|| per tensor, lr where either norm is 0 (a zero-initialised layer, or
    no gradient yet): one stacked torch.where on the device instead of a branch on read-back norms."""
    w, u = torch.stack(w_norms), torch.stack(u_norms)
    ratio = torch.where((w > 0) & (u > 0), w / u, torch.ones_like(w))
    return list((ratio * lr).unbind(0))  # 0-dim views: one multiplier per tensor, still on the device


@dataclass(frozen=True)
class PolyWarmup:
    """The LAMB reference implementation's rate: lr * (1 - min(step, training_steps) / training_steps) ** power, and
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
