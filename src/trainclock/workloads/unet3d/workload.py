"""The 3D U-Net benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (KiTS19 or generated volumes, the reference network, DiceCE, sliding-window
mean DICE, Nesterov SGD with warmup, the unet3d log keys)."""

from __future__ import annotations

from pathlib import Path

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.parallelize import build_parallelized
from trainclock.errors import UsageError
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.spec_base import division
from trainclock.workloads.unet3d.data.npy import Split, load_split
from trainclock.workloads.unet3d.data.patches import PatchSampler
from trainclock.workloads.unet3d.data.prepare import prepare_official, prepare_tier
from trainclock.workloads.unet3d.loss import dice_ce_loss
from trainclock.workloads.unet3d.metric import dice_sums, score
from trainclock.workloads.unet3d.model import N_CLASSES, Unet3D
from trainclock.workloads.unet3d.optim import NesterovWarmup
from trainclock.workloads.unet3d.parallelize import PARALLELISM
from trainclock.workloads.unet3d.spec import MEMBERS, MLPERF_ROUND, Unet3DSpec, get_member
from trainclock.workloads.unet3d.cost import run_progress
RULES_DATASET = "kits19"


class Unet3DWorkload(BenchmarkWorkload):
    key = "unet3d"
    full_size_flags = "--data KITS19_DIR"
    mlperf_round = MLPERF_ROUND
    title = "3D U-Net"
    specs = MEMBERS
    batch_units = "patches"
    ddp_only = "its evaluation cannot meet FSDP's all-gathers"
    needs_data = ("unet3d-kits19 trains on KiTS19: pass --data FOLDER (the kits19/data case folders, or the "
                  "reference's preprocessed case_XXXXX_x.npy / _y.npy pairs); it is never downloaded")

    def describe(self, spec: Unet3DSpec) -> str:
        return f"filters {'-'.join(map(str, spec.filters))}, {spec.patch}^3 patches"

    def build_job(self, spec: Unet3DSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
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

    return member_job(
        spec,
        division=division(spec, dataset, RULES_DATASET),
        model=model,
        batch=lambda step, rows: sampler.batch(step, spec.global_batch_size, rows),
        loss=lambda m, b: dice_ce_loss(m(b["image"]), b["label"]),
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=spec.flops_per_sample(),
        optimizer=optimizer(spec, len(split.train)),
        eval_schedule=EvalSchedule(every=spec.eval_every_samples, first=spec.eval_first_samples or None),
        eval_samples=len(split.eval),  # the rules count evaluation cases (42)
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, len(split.train)),
    )


def optimizer(spec: Unet3DSpec, train_cases: int) -> NesterovWarmup:
    return NesterovWarmup(spec.learning_rate, spec.initial_learning_rate, spec.warmup_epochs, train_cases,
                          spec.global_batch_size, spec.momentum, spec.weight_decay,
                          decay_boundary_epochs=spec.decay_boundary_epochs, decay_factor=spec.decay_factor)


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
