"""Masked-LM accuracy, the bert target metric: correct predictions over all masked positions of the
fixed eval set. Each data-parallel rank returns its (correct, count) sums; the loop adds them over
ranks, so the accuracy is that of the whole set, not a mean of per-rank means."""

from __future__ import annotations

import torch
from torch import nn

from trainclock.workload.base import EvalShard
from trainclock.workload.evaluation import equal_forwards, shard_rows
from trainclock.workloads.bert.data.batches import rows

METRIC = "masked-LM accuracy"


def mlm_sums(model: nn.Module, data: dict[str, torch.Tensor], micro: int, shard: tuple[int, int], autocast,
             device: torch.device) -> EvalShard:
    """This shard's summed hits and masked positions. Every shard runs the same number of forwards
    (FSDP ranks must meet in each one); a rank out of rows joins with a row weighted 0."""
    n = len(data["input_ids"])
    mine = shard_rows(n, shard)
    correct = torch.zeros((), dtype=torch.float64)
    count = torch.zeros((), dtype=torch.float64)
    for i in range(equal_forwards(n, shard[1], micro)):
        index = list(mine[i * micro:(i + 1) * micro])
        batch = rows(data, index or [0])
        with autocast():
            _, hits, masked = model(**{k: v.to(device) for k, v in batch.items()})
        if index:
            correct += hits.double().cpu()
            count += masked.double().cpu()
    return EvalShard(sums={"mlm_correct": correct, "mlm_count": count})


def score(stats: EvalShard) -> dict[str, float]:
    return {METRIC: float(stats.sums["mlm_correct"] / stats.sums["mlm_count"].clamp(min=1))}
