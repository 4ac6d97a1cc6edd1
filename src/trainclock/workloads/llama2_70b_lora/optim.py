"""The reference's optimizer (Hugging Face Trainer, optim "adamw_torch", lr_scheduler_type "cosine",
warmup_ratio 0): AdamW over the adapters only, cosine decay from the base rate to 0 at max_steps,
gradients clipped at 0.3; logged under the keys the llama2_70b_lora rules read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainclock.optim.adamw import AdamW
from trainclock.optim.schedules import WarmupCosine
from trainclock.workloads.llama2_70b_lora.spec import LoraSpec


@dataclass(frozen=True)
class LoraAdamW:
    spec: LoraSpec

    @property
    def adamw(self) -> AdamW:
        s = self.spec
        # Trainer's cosine: lr x 0.5(1 + cos(pi x step / max_steps)) after the warmup, 0 at max_steps
        schedule = WarmupCosine(s.learning_rate, 0.0, s.warmup_steps, s.training_steps)
        return AdamW(schedule, beta1=s.adam_beta1, beta2=s.adam_beta2, eps=s.adam_eps, weight_decay=s.weight_decay,
                     gradient_clip_norm=s.gradient_clip_norm)

    @property
    def gradient_clip_norm(self) -> float:
        return self.spec.gradient_clip_norm

    def build(self, model: nn.Module) -> torch.optim.Optimizer:
        return self.adamw.build(model)  # the trainable parameters only: the adapters

    def lr_at(self, step: int) -> float:
        return self.adamw.lr_at(step)

    def log_keys(self) -> dict[str, Any]:
        """The keys of the reference's log (scripts/mlperf_logging_utils.py), which the closed rules require."""
        s = self.spec
        return {
            "opt_name": "adamw",
            "opt_base_learning_rate": s.learning_rate,
            "opt_learning_rate_warmup_factor": s.warmup_steps / s.training_steps,  # the reference logs warmup_ratio
            "opt_learning_rate_training_steps": s.training_steps,
            "opt_adamw_weight_decay": s.weight_decay,
            "opt_gradient_clip_norm": s.gradient_clip_norm,
            "opt_adamw_beta_1": s.adam_beta1,
            "opt_adamw_beta_2": s.adam_beta2,
            "opt_adamw_epsilon": s.adam_eps,
        }
