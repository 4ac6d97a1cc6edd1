"""The 3D U-Net benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (KiTS19 or generated volumes, the reference network, DiceCE, sliding-window
mean DICE, Nesterov SGD with warmup, the unet3d log keys)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import build_parallelized
from trainclock.errors import UsageError
from trainclock.workload.base import EvalSchedule, EvalShard, Member, Progress, QualityTarget, RunSettings, TrainJob
from trainclock.workload.batch_plan import with_batch_settings
from trainclock.workloads.unet3d.data.npy import Split, load_split
from trainclock.workloads.unet3d.data.patches import PatchSampler
from trainclock.workloads.unet3d.data.prepare import prepare_official, prepare_tier
from trainclock.workloads.unet3d.loss import dice_ce_loss
from trainclock.workloads.unet3d.metric import METRIC, dice_sums, score
from trainclock.workloads.unet3d.model import N_CLASSES, Unet3D
from trainclock.workloads.unet3d.optim import NesterovWarmup
from trainclock.workloads.unet3d.parallelize import PARALLELISM, check_layout
from trainclock.workloads.unet3d.spec import MEMBERS, MLPERF_ROUND, Unet3DSpec, get_member


def quality(spec: Unet3DSpec) -> tuple[QualityTarget, ...]:
    return (QualityTarget(METRIC, spec.target_dice, "higher"),)


class Unet3DWorkload:
    key = "unet3d"
    mlperf_round = MLPERF_ROUND
    title = "3D U-Net"
    full_size = "unet3d-kits19"

    def members(self) -> Sequence[Member]:
        return [Member(s.name, s.parameter_count(), quality(s), s.target_source,
                       f"filters {'-'.join(map(str, s.filters))}, {s.patch}^3 patches", unit="samples")
                for s in MEMBERS.values()]

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        return None

    def resolve(self, member: str, settings: RunSettings, layout: Layout, device: torch.device) -> Unet3DSpec:
        spec = get_member(member)
        check_layout(layout)
        # refused now, before init measures for a minute (a dry run, on meta, reads no data)
        if spec.dataset == "kits19" and settings.data is None and device.type != "meta":
            raise UsageError("unet3d-kits19 trains on KiTS19: pass --data FOLDER (the kits19/data case folders, or "
                             "the reference's preprocessed case_XXXXX_x.npy / _y.npy pairs); it is never downloaded")
        return with_batch_settings(spec, settings, layout, "patches")

    def build_job(self, spec: Unet3DSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        check_layout(ctx.layout)
        split = ctx.main_first(lambda: load_data(spec, settings.data))  # one rank generates or preprocesses
        torch.manual_seed(seed)
        model = self.build_model(spec, ctx, device, settings)
        return unet3d_job(spec, model, split, seed, device, dataset=spec.dataset)

    def build_model(self, spec: Unet3DSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        """The network as this rank trains it. Built whole (31M parameters), except for a meta
        device (a dry run), where it is built and cut on meta."""
        return build_parallelized(lambda: Unet3D(spec.filters), device, ctx, PARALLELISM, compile=settings.compile,
                                  activation_checkpointing=settings.activation_checkpointing)

    def optimizer(self, spec: Unet3DSpec) -> NesterovWarmup:
        return optimizer(spec, spec.samples_per_epoch)

    def sample_loss(self, spec: Unet3DSpec, model: torch.nn.Module, rows: int, device: torch.device) -> torch.Tensor:
        images = torch.randn(rows, 1, *spec.patch_shape, device=device)
        labels = torch.randint(0, N_CLASSES, (rows, 1, *spec.patch_shape), dtype=torch.uint8, device=device)
        return dice_ce_loss(model(images), labels)

    def fetch_data(self) -> str | None:
        return None  # the tiers generate their volumes in prepare (nothing to download)

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if spec.dataset == "kits19" and data is None:
            raise UsageError("unet3d-kits19 prepares KiTS19 from a local copy: pass --data FOLDER (kits19/data)")
        folder = npy_folder(spec, data, force)
        split = load_split(folder, list(spec.eval_cases), spec.patch_shape)
        return f"{len(split.train)} train and {len(split.eval)} evaluation cases (.npy) in {folder}"

    def cost(self, member: str):
        from trainclock.workloads.unet3d.cost import cost_model

        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        from trainclock.workloads.unet3d.data.sample import write_sample

        return write_sample(get_member(member), folder, samples, seed)


def npy_folder(spec: Unet3DSpec, data: str | None, force: bool = False) -> Path:
    if data is not None:
        return prepare_official(Path(data).expanduser(), spec.patch, force)
    return prepare_tier(spec.name, spec.generated_cases, spec.generated_shape, spec.patch, force)


def load_data(spec: Unet3DSpec, data: str | None) -> Split:
    return load_split(npy_folder(spec, data), list(spec.eval_cases), spec.patch_shape)


def unet3d_job(spec: Unet3DSpec, model: torch.nn.Module, split: Split, seed: int, device: torch.device,
               dataset: str) -> TrainJob:
    """The job around a built model and loaded cases; tests build one directly to write logs."""
    sampler = PatchSampler(split.train, spec.patch_shape, spec.oversampling, seed)

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        return dice_sums(m, split.eval, spec.patch_shape, spec.overlap, shard, autocast, device, spec.eval_batch)

    return TrainJob(
        name=spec.name,
        benchmark=spec.mlperf_benchmark,
        division="closed" if dataset == "kits19" else "open",
        model=model,
        batch=lambda step, rows: sampler.batch(step, spec.global_batch_size, rows),
        loss=lambda m, b: dice_ce_loss(m(b["image"]), b["label"]),
        evaluate=evaluate,
        score=score,
        quality=quality(spec),
        # the v3.1 unet3d logs count eval_accuracy's epoch_num in samples (168 per KiTS19 epoch)
        progress=Progress(unit="samples", units_per_sample=1, log_key="epoch_num", log_in="samples"),
        global_batch_size=spec.global_batch_size,
        micro_batch_size=spec.micro_batch_size,
        flops_per_sample=spec.flops_per_sample(),
        optimizer=optimizer(spec, len(split.train)),
        eval_schedule=EvalSchedule(every=spec.eval_every_samples, first=spec.eval_first_samples or None),
        eval_samples=len(split.eval),  # the rules count evaluation cases (42)
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, len(split.train)),
    )


def optimizer(spec: Unet3DSpec, train_cases: int) -> NesterovWarmup:
    return NesterovWarmup(spec.learning_rate, spec.initial_learning_rate, spec.warmup_epochs, train_cases,
                          spec.global_batch_size, spec.momentum, spec.weight_decay)


def log_keys(spec: Unet3DSpec, train_cases: int) -> dict:
    """The benchmark-specific keys, as the official unet3d logs carry them."""
    return {
        "oversampling": spec.oversampling,
        "training_input_shape": list(spec.patch_shape),
        "validation_input_shape": list(spec.patch_shape),
        "validation_overlap": spec.overlap,
        "samples_per_epoch": train_cases,
        "train_samples": train_cases,  # the closed rules: the training set's size (168 cases), once, at init
    }
