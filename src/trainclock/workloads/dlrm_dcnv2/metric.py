"""AUC, the dlrm_dcnv2 target metric, over the whole validation set: each data-parallel rank
returns its predictions and labels, the loop gathers them in rank order, and torchmetrics'
BinaryAUROC (exact, no thresholds binning) scores the concatenation, as the reference's
torchmetrics AUROC does over gathered predictions. Never a mean of per-rank AUCs."""

from __future__ import annotations

import torch
from torch import nn

from trainclock.workload.base import EvalShard
from trainclock.workload.evaluation import equal_forwards, shard_rows
from trainclock.workloads.dlrm_dcnv2.data.dataset import CriteoDays
from trainclock.workloads.dlrm_dcnv2.spec import METRIC


def predictions(model: nn.Module, days: CriteoDays, micro: int, shard: tuple[int, int], autocast,
                device: torch.device) -> EvalShard:
    """This shard's click probabilities and labels. Every shard runs the same number of forwards
    (ranks of a sharded model must meet in each one); a rank out of rows joins with one row it drops."""
    n = len(days.validation)
    mine = shard_rows(n, shard)
    first, last = mine.start, mine.stop
    scores, labels = [], []
    for i in range(equal_forwards(n, shard[1], micro)):
        start = first + i * micro
        stop = min(start + micro, last)
        batch = days.validation_rows(start, stop) if stop > start else days.validation_rows(0, 1)
        with autocast():
            logits = model(batch["dense"].to(device), batch["sparse"].to(device))
        if stop > start:
            scores.append(torch.sigmoid(logits.float()).cpu())
            labels.append(batch["labels"])
    return EvalShard(gathered=[(torch.cat(scores) if scores else torch.zeros(0), torch.cat(labels) if labels else torch.zeros(0))])


def score(stats: EvalShard) -> dict[str, float]:
    # imported when scored: torchmetrics imports all its domains (transformers, scipy), and the
    # registry imports this module for every command
    from torchmetrics.functional.classification import binary_auroc

    scores = torch.cat([s for s, _ in stats.gathered])
    labels = torch.cat([lab for _, lab in stats.gathered]).long()
    return {METRIC: float(binary_auroc(scores, labels))}
