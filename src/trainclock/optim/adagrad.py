"""Adagrad at a constant rate, logged with MLPerf dlrm_dcnv2's `opt_adagrad_*` keys. The closed
rules fix everything but the rate and batch: no rate decay, no weight decay, accumulators starting
at 0, epsilon 1e-8, no warmup or decay schedule (the reference's LRPolicyScheduler with all steps 0)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


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

    def build(self, model: nn.Module) -> torch.optim.Adagrad:
        # foreach: one multi-tensor kernel over all parameters (the embedding tables dominate)
        return torch.optim.Adagrad([p for p in model.parameters() if p.requires_grad], lr=self.learning_rate,
                                   lr_decay=self.lr_decay, weight_decay=self.weight_decay,
                                   initial_accumulator_value=self.initial_accumulator_value, eps=self.eps,
                                   foreach=True)

    def __post_init__(self) -> None:
        if self.warmup_steps or self.decay_steps:
            raise ValueError("this Adagrad runs at a constant rate (the closed dlrm_dcnv2 rules fix warmup and decay at 0)")

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
