"""Top-1 accuracy from summed (correct, count) statistics: over two shards it equals torchmetrics'
MulticlassAccuracy over the whole set computed directly, padding rows are not counted, and the
model runs in eval mode (batch-norm running statistics) during the evaluation."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn
from torchmetrics.classification import MulticlassAccuracy

from trainclock.workload.base import EvalShard
from trainclock.workloads.resnet.metric import METRIC, batch_hits, score, top1_sums
from trainclock.workload.evaluation import evaluating


def test_summed_shards_equal_the_direct_accuracy_over_the_whole_set():
    torch.manual_seed(0)
    n, classes = 103, 7
    logits = torch.randn(n, classes)
    labels = torch.randint(0, classes, (n,))
    direct = MulticlassAccuracy(num_classes=classes, average="micro")(logits, labels).item()
    correct = count = torch.zeros((), dtype=torch.float64)
    for rank in range(2):
        rows = list(range(rank * n // 2, (rank + 1) * n // 2))
        for start in range(0, len(rows) + 8, 8):
            index = rows[start:start + 8]
            if not index:
                break
            hits, seen = batch_hits(logits[index], labels[index])
            correct, count = correct + hits, count + seen
    got = score(EvalShard(sums={"top1_correct": correct, "top1_count": count}))
    assert got[METRIC] == pytest.approx(direct, abs=1e-6)  # torchmetrics computes in float32
    assert got[METRIC] == pytest.approx((logits.argmax(1) == labels).double().mean().item(), abs=1e-12)


def test_padding_rows_are_not_counted():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [5.0, 0.0]])
    hits, seen = batch_hits(logits, torch.tensor([0, 0, -1]))
    assert (hits.item(), seen.item()) == (1.0, 2.0)
    hits, seen = batch_hits(logits, torch.tensor([-1, -1, -1]))
    assert (hits.item(), seen.item()) == (0.0, 0.0)


def test_padding_rows_are_not_counted():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 2 * 2, 3))
    images = torch.randint(0, 256, (5, 3, 2, 2), dtype=torch.uint8)
    with evaluating(model):
        shard = top1_sums(model, [(images, torch.tensor([0, 1, 2, 0, -1]))], contextlib.nullcontext, torch.device("cpu"))
    assert shard.sums["top1_count"].item() == 4.0
