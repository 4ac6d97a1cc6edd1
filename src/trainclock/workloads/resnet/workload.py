"""The ResNet benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (folder-layout images decoded in DataLoader workers or, on CUDA, on the device;
torchvision's ResNet, top-1 accuracy, LARS or SGD, MLPerf log keys)."""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import Materialize, parallelize
from trainclock.errors import UsageError
from trainclock.optim.lars import Lars
from trainclock.optim.schedules import WarmupPoly
from trainclock.optim.sgd import SGDMomentum
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.spec_base import division
from trainclock.workloads.resnet.data.device_decode import DeviceDecoder
from trainclock.workloads.resnet.data.folder import ImageFolder, scan
from trainclock.workloads.resnet.data.loader import EvalLoader, StepLoader, check_workers
from trainclock.datasets.fashion_mnist import CLASSES
from trainclock.workloads.resnet.data.prepare import prepare
from trainclock.workloads.resnet.data.sample import write_imagenet, write_tier
from trainclock.workloads.resnet.data.transforms import normalize
from trainclock.workloads.resnet.metric import score, top1_sums
from trainclock.workloads.resnet.parallelize import PARALLELISM
from trainclock.workloads.resnet.cost import run_progress
from trainclock.workloads.resnet.spec import (END_LEARNING_RATE, MEMBERS, MLPERF_ROUND, OPTIMIZERS, ResNetSpec,
                                              get_member)

NEEDS_DATA = ("resnet-50 trains on ImageNet: pass --data FOLDER holding train/<class>/*.JPEG and "
              "val/<class>/*.JPEG (it cannot be downloaded at run time)")
RULES_DATASET = "imagenet"


class ResNetWorkload(BenchmarkWorkload):
    key = "resnet"
    full_size_flags = "--data DIR"
    mlperf_round = MLPERF_ROUND
    title = "ResNet-50"
    specs = MEMBERS
    unit = batch_units = "images"
    needs_data = NEEDS_DATA

    def describe(self, spec: ResNetSpec) -> str:
        return spec.shape.describe()

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--optimizer", choices=OPTIMIZERS,
                           help="resnet-50's optimizer: lars (default) or sgd, each with the rules' keys")
        group.add_argument("--loader-workers", type=int, metavar="N",
                           help="DataLoader worker processes decoding images (default: the member's)")
        group.add_argument("--decode-on-device", action=argparse.BooleanOptionalAction, default=None,
                           help="decode JPEGs on the run's device (nvJPEG on CUDA), the workers only reading "
                                "files (default: on for CUDA, off otherwise)")

    def configure(self, spec: ResNetSpec, settings: RunSettings, layout: Layout, device: torch.device) -> ResNetSpec:
        if settings.extra.get("optimizer"):
            spec = spec.with_optimizer(settings.extra["optimizer"])
        if settings.extra.get("loader_workers") is not None:
            spec = replace(spec, loader_workers=check_workers(settings.extra["loader_workers"]))
        if settings.extra.get("decode_on_device") is not None:
            spec = replace(spec, decode_on_device=settings.extra["decode_on_device"])
        return spec

    def check_run(self, spec: ResNetSpec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        super().check_run(spec, settings, layout, device)
        if device.type != "meta" and settings.data is not None:  # a bad folder is refused before the run measures
            scan(settings.data)

    def build_job(self, spec: ResNetSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        return build_job(spec, settings, seed, ctx, device)

    def build_model(self, spec: ResNetSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        return build_model(spec, ctx, device, settings)

    def optimizer(self, spec: ResNetSpec) -> Lars | SGDMomentum:
        return optimizer(spec)

    def sample_loss(self, spec: ResNetSpec, model: torch.nn.Module, rows: int, device: torch.device) -> torch.Tensor:
        side = spec.shape.image_size
        images = torch.randn(rows, 3, side, side, device=device)
        if spec.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, spec.shape.num_classes, (rows,), device=device)
        return F.cross_entropy(model(images).float(), labels, label_smoothing=spec.label_smoothing)

    def fetch_data(self) -> str | None:
        return None  # Fashion-MNIST comes with Debian's dataset-fashion-mnist (scripts/install.sh)

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if data is None and spec.dataset == "imagenet":
            raise UsageError(NEEDS_DATA)
        folder = scan(data if data is not None else prepare(spec.train_images, spec.val_images, 28, force=force))
        return (f"{len(folder.train):,} train and {len(folder.val):,} val images in {len(folder.classes)} classes "
                f"in {folder.root}")

    def cost(self, member: str):
        from trainclock.workloads.resnet.cost import cost_model

        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        spec = get_member(member)
        if samples < 2:  # one image a class, and a classifier needs two classes
            raise UsageError(f"resnet sample data needs at least 2 training images (2 classes), got {samples}")
        if spec.dataset == "imagenet":
            return str(write_imagenet(Path(folder), samples, seed))
        return str(write_tier(Path(folder), samples, seed, CLASSES, 28))  # the export's side (load_folder)


def load_folder(spec: ResNetSpec, settings: RunSettings, ctx: ParallelContext) -> tuple[ImageFolder, str]:
    if settings.data is not None:
        return scan(settings.data), spec.dataset if spec.dataset == "imagenet" else "images"
    if spec.dataset == "imagenet":
        raise UsageError(NEEDS_DATA)
    root = ctx.main_first(lambda: prepare(spec.train_images, spec.val_images, 28))  # one rank exports
    return scan(root), spec.dataset


def build_job(spec: ResNetSpec, settings: RunSettings, seed: int, ctx: ParallelContext,
              device: torch.device) -> TrainJob:
    folder, dataset = load_folder(spec, settings, ctx)
    if spec.dataset != "imagenet" and len(folder.classes) != spec.shape.num_classes:
        spec = replace(spec, shape=replace(spec.shape, num_classes=len(folder.classes)))  # a user's own folder
    if device.type == "cpu" and spec.loader_workers:
        # the decoding workers run on the same cores: intra-op threads left spinning beside them made a
        # 2-core run 4-8x slower (measured on resnet-mini under load); leave them a core each
        torch.set_num_threads(max(1, min(torch.get_num_threads(), (os.cpu_count() or 1) - spec.loader_workers)))
    torch.manual_seed(seed)
    model = build_model(spec, ctx, device, settings)
    shard = (ctx.dp_rank, ctx.dp_size)
    on_device = spec.decode_on_device if spec.decode_on_device is not None else device.type == "cuda"
    on_device = on_device and device.type != "meta"  # a dry run's model is on meta; its host work stays PIL's

    def decoder() -> DeviceDecoder | None:  # one per loader: each owns a stream, the loaders run on two threads
        return DeviceDecoder(device, spec.transforms, spec.micro_batch_size) if on_device else None

    train = StepLoader(folder.train, spec.transforms, seed, spec.global_batch_size,
                       ctx.dp_slice(spec.global_batch_size), spec.loader_workers, decoder=decoder())
    val = EvalLoader(folder.val, spec.transforms, spec.micro_batch_size, shard, spec.loader_workers,
                     decoder=decoder())

    def evaluate(m: torch.nn.Module, autocast, part: tuple[int, int]) -> EvalShard:
        if part != shard:
            raise RuntimeError(f"the eval loader was built for shard {shard}, asked for {part}")
        return top1_sums(m, val, autocast, device)

    def loss(m: torch.nn.Module, batch: dict) -> torch.Tensor:
        logits = m(normalize(batch["image"], spec.channels_last))
        return F.cross_entropy(logits.float(), batch["label"], label_smoothing=spec.label_smoothing)

    return resnet_job(spec, model, train, loss, evaluate, dataset=dataset, train_images=len(folder.train),
                      val_images=len(folder.val))


def build_model(spec: ResNetSpec, ctx: ParallelContext, device: torch.device, settings: RunSettings) -> torch.nn.Module:
    """ResNet as this rank trains it. Built whole (25.6M parameters at most), except for a meta
    device (a dry run), where it is built and cut on meta."""
    from trainclock.workloads.resnet.model import build_model as resnet_model  # torchvision: only where a network is built

    on_meta = device.type == "meta"
    with torch.device("meta") if on_meta else contextlib.nullcontext():
        model = resnet_model(spec.shape)
    if not on_meta:
        model = model.to(device)
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return parallelize(model, ctx, PARALLELISM, compile=settings.compile,
                       activation_checkpointing=settings.activation_checkpointing,
                       materialize=Materialize(device) if on_meta else None)


def resnet_job(spec: ResNetSpec, model: torch.nn.Module, batch, loss, evaluate, dataset: str, train_images: int,
               val_images: int) -> TrainJob:
    """The job around a built model and data; progress is in epochs of this folder's train split."""
    from trainclock.workloads.resnet.model import train_flops_per_image  # torchvision: only where a network is built

    spec = replace(spec, train_images=train_images)
    full = spec.dataset == "imagenet"
    return member_job(
        spec,
        division=division(spec, dataset, RULES_DATASET),
        model=model,
        batch=batch,
        loss=loss,
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec, train_images),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=train_flops_per_image(spec.shape),
        optimizer=optimizer(spec),
        # the full size's cadence is in epochs of the folder it trains on: every 4, first after 2
        eval_schedule=EvalSchedule(every=4 * train_images if full else spec.eval_every_samples,
                                   first=2 * train_images if full else spec.eval_first_samples),
        eval_samples=val_images,
        max_samples=spec.max_samples,
        log_keys={"model_bn_span": spec.micro_batch_size, "dataset": dataset},
    )


def optimizer(spec: ResNetSpec) -> Lars | SGDMomentum:
    schedule = WarmupPoly(spec.learning_rate, END_LEARNING_RATE, warmup_steps=spec.warmup_steps,
                          decay_steps=spec.decay_steps, power=2.0)
    if spec.optimizer == "lars":
        return Lars(schedule, warmup_epochs=spec.warmup_epochs, momentum=spec.momentum,
                    weight_decay=spec.weight_decay)
    return SGDMomentum(schedule, momentum=spec.momentum, weight_decay=spec.weight_decay,
                       warmup_epochs=spec.warmup_epochs)
