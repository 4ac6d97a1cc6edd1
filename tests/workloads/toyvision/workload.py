"""The toy image classifier as a Workload (see trainclock.workload.base)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from tests.workloads.toyvision.data import TRAIN_IMAGES, VAL_IMAGES, make_split, train_batch
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism, parallelize
from trainclock.errors import UsageError
from trainclock.optim.schedules import WarmupPoly
from trainclock.optim.sgd import SGDMomentum
from trainclock.workload.base import (EvalSchedule, EvalShard, Member, Progress, QualityTarget, RunSettings, TargetSource,
                                      TrainJob)
from trainclock.workload.batch_plan import check_global_batch, micro_batch

TARGET = QualityTarget("top-1 accuracy", 0.88, "higher")


@dataclass(frozen=True)
class ToySpec:
    name: str = "toyvision-tiny"
    global_batch_size: int = 64
    micro_batch_size: int = 32
    eval_every_samples: int = 1024  # a quarter epoch
    max_samples: int = 16 * TRAIN_IMAGES


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.head = nn.Linear(32 * 4 * 4, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).flatten(1))


class ToyVision:
    key = "toyvision"
    mlperf_round = "3.1"  # its logs name resnet as their benchmark: reviewed under the round of the resnet rules
    title = "toy image classifier (tests only)"
    full_size = "toyvision-tiny"

    def members(self) -> Sequence[Member]:
        params = sum(p.numel() for p in SmallCNN().parameters())
        return [Member("toyvision-tiny", params, (TARGET,), TargetSource.MEASURED,
                       "2 conv layers, 8x8 images, 10 classes", unit="images", target_note="tests/workloads/toyvision")]

    resumed_flags = ("dataset_name",)  # what a resume takes over (a test checks it refuses another)

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        # a workload's own flag: named in the log, so a test sees it arrive through RunSettings.extra
        group.add_argument("--dataset-name", default="generated 8x8 patterns", help="the log's dataset key")
        group.add_argument("--offline-eval", action="store_true",
                           help="evaluate saved models after training, off the clock (EvalSchedule.offline)")
        group.add_argument("--background-scoring", type=float, default=None, metavar="SECONDS",
                           help="score evaluations on a thread while training goes on (EvalSchedule."
                                "background_scoring), each taking at least SECONDS, so a test sees the overlap")

    def resolve(self, member: str, settings: RunSettings, layout: Layout, device: torch.device) -> ToySpec:
        spec = ToySpec()
        if layout.tp > 1 or layout.pp > 1:
            raise UsageError("toyvision has no tensor-parallel plan or pipeline cut; use data parallel only")
        if settings.global_batch_size is not None:
            check_global_batch(settings.global_batch_size, "images")
            spec = replace(spec, global_batch_size=settings.global_batch_size)
        return replace(spec, micro_batch_size=micro_batch(spec.global_batch_size, settings.micro_batch_size,
                                                          spec.micro_batch_size, layout, "images"))

    def build_job(self, spec: ToySpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        if settings.data is not None:
            raise UsageError("toyvision makes its own data; drop --data")
        train, val = make_split(TRAIN_IMAGES, 1), make_split(VAL_IMAGES, 2)
        torch.manual_seed(seed)
        model = parallelize(SmallCNN().to(device), ctx, ModelParallelism(), compile=settings.compile)

        def evaluate(m: nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
            rank, ranks = shard
            rows = slice(rank * VAL_IMAGES // ranks, (rank + 1) * VAL_IMAGES // ranks)
            m.eval()
            with torch.no_grad(), autocast():
                predicted = m(val["image"][rows].to(device)).argmax(dim=1).cpu()
            m.train()
            # predictions gathered, not per-rank accuracies averaged: the metric of the whole set
            return EvalShard(gathered=list(zip(range(rows.start, rows.stop), predicted.tolist())))

        scoring_seconds = settings.extra.get("background_scoring")

        def score(stats: EvalShard) -> dict[str, float]:
            if scoring_seconds:
                time.sleep(scoring_seconds)  # as COCO evaluation takes seconds of host time
            assert sorted(i for i, _ in stats.gathered) == list(range(VAL_IMAGES)), "shards must cover the set once"
            correct = sum(int(p == val["label"][i]) for i, p in stats.gathered)
            return {TARGET.metric: correct / VAL_IMAGES}

        return TrainJob(
            name=spec.name, benchmark="resnet", division="open", model=model,
            batch=lambda step, rows: train_batch(train, seed, step, spec.global_batch_size, rows),
            loss=lambda m, b: F.cross_entropy(m(b["image"]).float(), b["label"]),
            evaluate=evaluate, score=score, quality=(TARGET,),
            progress=Progress(unit="images", units_per_sample=1, log_key="epoch_num", log_in="epochs",
                              samples_per_epoch=TRAIN_IMAGES),
            global_batch_size=spec.global_batch_size, micro_batch_size=spec.micro_batch_size,
            flops_per_sample=0.0,
            optimizer=SGDMomentum(WarmupPoly(0.05, 0.0001, warmup_steps=5, decay_steps=400), momentum=0.9,
                                  weight_decay=5e-5, warmup_epochs=5 * spec.global_batch_size / TRAIN_IMAGES),
            eval_schedule=EvalSchedule(every=spec.eval_every_samples, offline=settings.extra.get("offline_eval", False),
                                       background_scoring=scoring_seconds is not None),
            eval_samples=VAL_IMAGES, max_samples=spec.max_samples,
            log_keys={"dataset": settings.extra.get("dataset_name", "generated 8x8 patterns")},
        )

    def fetch_data(self) -> str | None:
        return None

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        return "toyvision generates its data in memory at each run"

    def cost(self, member: str):
        return None
