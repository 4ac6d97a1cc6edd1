"""Adagrad at a constant rate, logged with the MLPerf rules' `opt_adagrad_*` keys. The closed
rules that use it fix everything but the rate and batch: no rate decay, no weight decay, accumulators starting
at 0, epsilon 1e-8, no warmup or decay schedule (the reference's LRPolicyScheduler with all steps 0).

The update is torch's Adagrad at those values: sum += g^2, w -= lr * g / (sqrt(sum) + eps). A sparse
gradient (an embedding table's looked-up rows, nn.EmbeddingBag(sparse=True)) updates those rows
and nothing else: its ids are sorted and each run of equal ids summed into one row, in tensors of
the gradient's own length, so the update neither reads a count back to the host (torch's coalesce
does, on a GPU) nor touches a row no sample looked up. A table with no more rows than the ids a
step looked up in it (the tiers' small tables, the official size's tiny ones) has its ids summed
into a dense gradient instead and joins the dense update: that touches every row, at no more work
than the sparse update's own per id, and in one kernel with the others. Dense gradients take one
multi-tensor kernel per kind of tensor (plain, DTensor); the rate is a Python number, so no step
count is read back either (torch's Adagrad reads every parameter's step to decay a rate the rules
keep fixed)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.distributed import local_shards


@dataclass(frozen=True)
class Adagrad:
    learning_rate: float
    lr_decay: float = 0.0
    weight_decay: float = 0.0
    initial_accumulator_value: float = 0.0
    eps: float = 1e-8
    warmup_steps: int = 0
    decay_start_step: int = 0
    decay_steps: int = 0
    gradient_clip_norm: float | None = None  # the reference does not clip

    def build(self, model: nn.Module) -> RowSparseAdagrad:
        return RowSparseAdagrad([p for p in model.parameters() if p.requires_grad], lr=self.learning_rate,
                                eps=self.eps, initial_accumulator_value=self.initial_accumulator_value)

    def __post_init__(self) -> None:
        if self.warmup_steps or self.decay_steps:
            raise ValueError("this Adagrad runs at a constant rate (the closed rules that use it fix warmup and "
                             "decay at 0)")
        if self.lr_decay or self.weight_decay:
            raise ValueError("this Adagrad has no rate decay or weight decay "
                             "(the closed rules that use it fix both at 0)")

    def lr_at(self, step: int) -> float:
        return self.learning_rate

    def log_keys(self) -> dict[str, Any]:
        return {
            "opt_name": "adagrad",
            "opt_base_learning_rate": self.learning_rate,
            "opt_adagrad_learning_rate_decay": self.lr_decay,
            "opt_weight_decay": self.weight_decay,
            "opt_adagrad_initial_accumulator_value": self.initial_accumulator_value,
            "opt_adagrad_epsilon": self.eps,
            "opt_learning_rate_warmup_steps": self.warmup_steps,
            "opt_learning_rate_decay_start_step": self.decay_start_step,
            "opt_learning_rate_decay_steps": self.decay_steps,
        }


class RowSparseAdagrad(torch.optim.Optimizer):
    """Adagrad (lr_decay and weight decay 0) whose sparse gradients update only their rows. The
    state has torch's Adagrad's keys ("step", "sum"), made here at once as torch's is, so
    checkpoints of either load into the other and a checkpoint taken before the first step needs
    no dense zero gradient of every table to make it."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, eps: float = 1e-8,
                 initial_accumulator_value: float = 0.0) -> None:
        if lr < 0 or eps < 0:
            raise ValueError(f"Adagrad needs a rate and epsilon >= 0, got lr={lr}, eps={eps}")
        super().__init__(params, {"lr": lr, "eps": eps, "initial_accumulator_value": initial_accumulator_value})
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": torch.zeros((), dtype=torch.float32),
                                 "sum": torch.full_like(p, initial_accumulator_value,
                                                        memory_format=torch.preserve_format)}
        local_shards.present_optimizer_state(self)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, eps = group["lr"], group["eps"]
            dense: dict[type, tuple[list, list, list]] = {}
            steps = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                steps.append(state["step"])
                grad = p.grad
                if grad.is_sparse and grad._values().shape[0] < p.shape[0]:
                    sparse_row_update(p, grad, state["sum"], lr, eps)
                    continue
                if grad.is_sparse:  # as many ids as rows: summed into a dense gradient
                    grad = torch.zeros_like(p).index_add_(0, grad._indices()[0], grad._values())
                # foreach kernels take one tensor type per call (DTensor parameters apart)
                kind = dense.setdefault(type(p), ([], [], []))
                kind[0].append(p)
                kind[1].append(grad)
                kind[2].append(state["sum"])
            if steps:  # counted as torch's Adagrad counts them (checkpoints carry it); never read
                torch._foreach_add_(steps, 1.0)
            for params, grads, sums in dense.values():
                # torch's multi-tensor Adagrad, in its order of operations
                torch._foreach_addcmul_(sums, grads, grads, value=1)
                std = torch._foreach_sqrt(sums)
                torch._foreach_add_(std, eps)
                torch._foreach_addcdiv_(params, torch._foreach_mul(grads, -lr), std)
        return loss


def sparse_row_update(param: torch.Tensor, grad: torch.Tensor, state_sum: torch.Tensor, lr: float, eps: float) -> None:
    """Adagrad on the rows of a sparse COO gradient (ids along dim 0, possibly repeated), in place."""
    ids, values = grad._indices()[0], grad._values()  # uncoalesced: a lookup per id, repeats apart
    if ids.numel() == 0:
        return
    ids, order = ids.sort()
    values = values.index_select(0, order)
    # slot s holds the s-th distinct id: a run of equal ids starts where the id changes
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[1:] = ids[1:] != ids[:-1]
    slot = starts.cumsum(0) - 1
    summed = torch.zeros_like(values).index_add_(0, slot, values)
    # slots past the last distinct id keep a gradient of 0 and point at the first id: they add 0
    rows = ids[:1].expand_as(ids).clone().scatter_(0, slot, ids)
    state_sum.index_add_(0, rows, summed * summed)
    std = state_sum.index_select(0, rows).sqrt_().add_(eps)
    param.index_add_(0, rows, summed / std, alpha=-lr)
