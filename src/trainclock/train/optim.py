"""AdamW with decoupled weight decay on matrices only, and warmup + cosine decay."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.tensor import DTensor


@dataclass(frozen=True)
class OptimConfig:
    learning_rate: float
    end_learning_rate: float
    warmup_steps: int
    decay_steps: int
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    gradient_clip_norm: float = 1.0

    def lr_at(self, step: int) -> float:
        """Linear warmup to the base rate over warmup_steps, then cosine decay to the end rate at
        decay_steps (counted from step 0, as MLPerf's gpt3 reference does), then flat."""
        if step < self.warmup_steps:
            return self.learning_rate * (step + 1) / self.warmup_steps
        span = max(self.decay_steps - self.warmup_steps, 1)
        progress = min((step - self.warmup_steps) / span, 1.0)
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return self.end_learning_rate + (self.learning_rate - self.end_learning_rate) * cosine


def build_optimizer(model: nn.Module, config: OptimConfig) -> torch.optim.AdamW:
    """Weight decay on matrices only. Sharded (DTensor) and plain parameters go into separate
    groups: the fused kernel takes one kind per call, and tensor parallel mixes them."""
    groups = []
    for decays in (True, False):
        for sharded in (False, True):
            params = [p for p in model.parameters()
                      if p.requires_grad and (p.dim() >= 2) == decays and isinstance(p, DTensor) == sharded]
            if params:
                groups.append({"params": params, "weight_decay": config.weight_decay if decays else 0.0})
    # The fused kernel (one pass over all parameters) exists for CPU and CUDA tensors alike.
    return torch.optim.AdamW(
        groups, lr=config.lr_at(0), betas=(config.beta1, config.beta2), eps=config.eps, fused=True
    )
