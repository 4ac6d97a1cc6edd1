"""LambOptimizer before the multi-tensor rewrite (src/trainclock/optim/lamb.py): the same LAMB
update, a Python loop over the parameter tensors with a few small ops on each. Kept as the
before-version that benchmarks/lamb_step.py times against."""

from __future__ import annotations

import torch


class LoopLambOptimizer(torch.optim.Optimizer):
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
