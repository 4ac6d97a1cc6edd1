"""What a workload hands the generic loop: a model, its batches, its metric and its target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainclock.train.optim import OptimConfig

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class TrainJob:
    workload: str  # e.g. "gpt3-mini": the results folder name
    mlperf_benchmark: str  # submission_benchmark, e.g. "gpt3"
    division: str  # "closed" only when model, data and hyperparameters are MLPerf's own
    model: nn.Module
    batch: Callable[[int], Batch]  # the global batch of an optimizer step
    # (metric sum, count) over shard (rank, ranks) of the fixed validation set; the loop averages
    evaluate: Callable[[nn.Module, Callable[[], Any], tuple[int, int]], tuple[float, int]]
    metric_name: str  # e.g. "validation log perplexity"
    target: float  # quality target; lower is better
    global_batch_size: int
    micro_batch_size: int
    tokens_per_sample: int
    flops_per_sample: float  # training FLOPs per sample (forward + backward)
    optim: OptimConfig
    eval_every_samples: int
    eval_samples: int  # logged as eval_samples (tokens for gpt3)
    max_samples: int
    log_keys: dict[str, Any] = field(default_factory=dict)  # extra MLPerf keys (shape, dataset, ...)
    counts_in_tokens: bool = True  # MLPerf gpt3 logs epoch_num and train_samples in tokens

    def log_count(self, samples: int) -> int:
        """The progress count the MLPerf log uses for this benchmark (tokens or samples)."""
        return samples * self.tokens_per_sample if self.counts_in_tokens else samples
