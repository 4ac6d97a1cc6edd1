"""What the training loop needs from an optimizer choice: build it, the learning rate at each
step, gradient clipping, and the MLPerf keys that describe it in the log."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

from trainclock.distributed.local_shards import is_dtensor


class OptimizerSetup(Protocol):
    """An optimizer with its schedule and hyperparameters, as a workload declares it."""

    gradient_clip_norm: float | None  # clip the global gradient norm to this (None: no clipping)

    def build(self, model: nn.Module) -> torch.optim.Optimizer:
        """The optimizer over the model's trainable parameters."""
        ...

    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step `step` (0-based); the loop sets it before each step."""
        ...

    def log_keys(self) -> dict[str, Any]:
        """The MLPerf `opt_*` (and optimizer-specific) keys, in the order the log gets them."""
        ...


class Schedule(Protocol):
    def lr_at(self, step: int) -> float: ...


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices (and convolution kernels) only, not on biases and norms. Sharded
    (DTensor) and plain parameters go into separate groups: fused kernels take one kind per call,
    and tensor parallel mixes them."""
    groups = []
    for decays in (True, False):
        for sharded in (False, True):
            params = [p for p in model.parameters()
                      if p.requires_grad and (p.dim() >= 2) == decays and is_dtensor(p) == sharded]
            if params:
                groups.append({"params": params, "weight_decay": weight_decay if decays else 0.0})
    return groups
