"""Top-1 accuracy over the whole validation set: each data-parallel rank returns its (correct,
count) sums, the loop adds them over ranks, so the accuracy is that of every image once, not a
mean of per-rank accuracies. The per-batch hits come from torchmetrics' MulticlassAccuracy with
micro averaging, times the batch's counted images (padding rows carry label -1 and are ignored)."""

from __future__ import annotations

import torch
from torch import nn

from trainclock.workload.base import EvalShard

from trainclock.workloads.resnet.data.transforms import normalize

METRIC = "top-1 accuracy"


def batch_hits(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct, counted) of one batch, as float64 sums."""
    # imported when a batch is scored: torchmetrics imports all its domains (transformers, scipy),
    # and the registry imports this module for every command
    from torchmetrics.functional.classification import multiclass_accuracy

    counted = labels >= 0
    n = counted.sum()
    if not n:
        return torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
    accuracy = multiclass_accuracy(logits[counted].float(), labels[counted], num_classes=logits.shape[1],
                                   average="micro", top_k=1)
    return (accuracy.double() * n).round(), n.double()


def top1_sums(model: nn.Module, batches, autocast, device: torch.device) -> EvalShard:
    correct = torch.zeros((), dtype=torch.float64)
    count = torch.zeros((), dtype=torch.float64)
    for images, labels in batches:
        with autocast():
            logits = model(normalize(images.to(device, non_blocking=True)))
        hits, n = batch_hits(logits.cpu(), labels)
        correct += hits
        count += n
    return EvalShard(sums={"top1_correct": correct, "top1_count": count})


def score(stats: EvalShard) -> dict[str, float]:
    return {METRIC: float(stats.sums["top1_correct"] / stats.sums["top1_count"].clamp(min=1))}
