"""The contract between a benchmark and the rest of trainclock. A benchmark is a folder under
workloads/ whose package exposes WORKLOAD, an object that satisfies the Workload protocol; the
loop, the distributed package, the store, the reports and the commands speak only of what is
declared here: batches they never look inside, progress units, metrics with a direction, an
optimizer setup, MLPerf log keys. No torch model code lives here."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol

import torch
from torch import nn

from trainclock.mllog.progress import ProgressCodec
from trainclock.workload.batches import TreeBatch

if TYPE_CHECKING:
    from pathlib import Path

    from trainclock.distributed.context import ParallelContext
    from trainclock.distributed.layout import Layout
    from trainclock.optim.base import OptimizerSetup
    from trainclock.workload.cost_model import WorkloadCost

Direction = Literal["lower", "higher"]
Autocast = Callable[[], Any]  # a fresh autocast (or null) context per call


class TargetSource(StrEnum):
    """Where a member's quality target comes from. A str, so that `list` and the stored runs keep
    reading the kind as the text they always printed."""

    MLPERF = "mlperf"  # the rules' own target: only such a member can run in the closed division
    MEASURED = "measured"  # trainclock's reference runs, recorded in the package's targets/<member>.json
    ESTIMATED = "estimated"  # a provisional number with no reference runs behind it yet


@dataclass(frozen=True)
class QualityTarget:
    """One metric the run must reach; a benchmark's target may have several (all must hold at the
    same evaluation: e.g. box and mask mAP, or an image quality and a text alignment score)."""

    metric: str  # the name the workload's score() returns and the log records
    threshold: float
    direction: Direction

    def met(self, value: float) -> bool:
        return value <= self.threshold if self.direction == "lower" else value >= self.threshold

    def describe(self) -> str:
        return f"{self.metric} {'<=' if self.direction == 'lower' else '>='} {self.threshold:g}"


@dataclass(frozen=True)
class Progress:
    """What the benchmark counts. Throughput is in `unit` per second (tokens, images, samples);
    the MLPerf log counts progress in units, samples, epochs or optimizer steps under `log_key`, as
    the rules of the benchmark say (e.g. epoch_num counting tokens, samples or epochs; samples_count;
    step_num counting steps)."""

    unit: str = "samples"
    units_per_sample: int = 1
    log_key: Literal["epoch_num", "samples_count", "step_num"] = "epoch_num"
    log_in: Literal["units", "samples", "epochs", "steps"] = "samples"
    samples_per_epoch: int | None = None  # needed when log_in is "epochs"
    samples_per_step: int | None = None  # needed when log_in is "steps": the global batch size

    @cached_property
    def codec(self) -> ProgressCodec:
        """How the log writes this progress (codec.count: the count after so many samples;
        codec.header: the event that says so) and how the counts read back (mllog.progress)."""
        return ProgressCodec(self.unit, self.units_per_sample, self.log_in, self.samples_per_epoch,
                             self.samples_per_step)


@dataclass(frozen=True)
class EvalSchedule:
    """Evaluate after the step that reaches `first` samples, then every `every` samples (an MLPerf
    cadence given in epochs is converted by the workload: 4 epochs with an offset, ...)."""

    every: int
    first: int | None = None
    # the rules score saved models after training, off the clock (in some rules' words: "evaluation
    # is done offline, the time is not counted towards the submission time"): the loop saves the
    # model at each point instead, trains to its sample limit, then evaluates the saved models in
    # order, and the run ends at the first that meets the target, at the time it was saved
    offline: bool = False
    # the rules time the evaluation but let training go on while its metric is computed (some
    # published detection logs: eval_start, the next block_start, eval_accuracy seconds later): the
    # predictions are made in the step's place, rank 0 scores them on a thread (train/scoring.py),
    # and the run ends at the read of the losses where a passing result has come in
    background_scoring: bool = False

    def __post_init__(self) -> None:
        if self.offline and self.background_scoring:
            raise ValueError("an offline evaluation is scored after training; it cannot also be scored in the background")

    def first_at(self) -> int:
        return self.first if self.first is not None else self.every

    def next_after(self, samples: int, planned: int) -> int:
        while planned <= samples:
            planned += self.every
        return planned


@dataclass
class EvalShard:
    """One data-parallel rank's share of an evaluation. `sums` are summed over ranks (a mean's sum
    and count, confusion counts); `gathered` lists are concatenated in rank order (predictions for
    mAP or AUC), so the metric is computed over the whole validation set, not averaged per rank."""

    sums: dict[str, torch.Tensor] = field(default_factory=dict)
    gathered: list[Any] = field(default_factory=list)


@dataclass
class TrainJob:
    """Everything the generic loop trains: built by a workload inside init (untimed)."""

    name: str  # the member (<benchmark>-<size>): the results folder name
    benchmark: str  # the MLPerf key (submission_benchmark)
    division: str  # "closed" only when model, data and hyperparameters are MLPerf's own
    model: nn.Module
    # batch(n, rows): rows `rows` (a data-parallel rank's slice) of the global batch of optimizer step n, built
    # from (seed, n, rows) alone, identical to the same rows of a whole batch: a rank builds only its own
    batch: Callable[[int, slice], Any]
    loss: Callable[[nn.Module, Any], torch.Tensor]  # mean training loss of a micro-batch on the device
    evaluate: Callable[[nn.Module, Autocast, tuple[int, int]], EvalShard]  # shard (rank, ranks) of the eval set
    score: Callable[[EvalShard], dict[str, float]]  # metric values from the reduced statistics
    quality: tuple[QualityTarget, ...]
    progress: Progress
    global_batch_size: int  # samples per optimizer step
    micro_batch_size: int  # samples per forward/backward on one process
    flops_per_sample: float  # training FLOPs per sample (forward + backward); 0 where not defined
    optimizer: "OptimizerSetup"
    eval_schedule: EvalSchedule
    eval_samples: int  # logged as eval_samples, in the rules' unit
    max_samples: int  # the run stops as aborted after this many samples
    # benchmark-specific MLPerf keys (shapes, dataset), logged at init; a train_samples among them (the
    # training set's size, where the rules ask for that) replaces the samples trained the loop logs at run end
    log_keys: dict[str, Any] = field(default_factory=dict)
    batches: TreeBatch = field(default_factory=TreeBatch)  # how a batch is sliced and moved to a device
    # "one": a single eval_accuracy line per evaluation (a dict where several metrics); "per_metric": one
    # line per quality metric with metadata {"metric": name}, as some benchmarks' rules read them
    eval_lines: Literal["one", "per_metric"] = "one"
    # the batches' shapes repeat from step to step: on a GPU, cuDNN then times its convolution algorithms
    # for each shape once and keeps the fastest (cudnn.benchmark); images of ever new sizes would re-time
    fixed_input_shapes: bool = True
    # steps whose batches the loop builds on a thread ahead of a CPU run (accelerators: always 2); worth it
    # only where a batch costs about as much as the step and its kernels release the GIL
    cpu_prefetch_steps: int = 0
    # the lowest precision of the model's linear layers when lower than the run's (fp8 matmuls), for the log
    linear_precision: Literal["fp8"] | None = None

    def reached(self, metrics: dict[str, float]) -> bool:
        return all(t.met(metrics[t.metric]) for t in self.quality)

    def eval_accuracy(self, metrics: dict[str, float]) -> Any:
        """The eval_accuracy value of the log: the number, or a dict of the several metrics."""
        if len(self.quality) == 1:
            return metrics[self.quality[0].metric]
        return dict(metrics)

    def eval_accuracy_lines(self, metrics: dict[str, float]) -> list[tuple[Any, dict[str, Any]]]:
        """(value, extra metadata) of each eval_accuracy line one evaluation writes."""
        if self.eval_lines == "per_metric":
            return [(metrics[t.metric], {"metric": t.metric}) for t in self.quality]
        return [(self.eval_accuracy(metrics), {})]


@dataclass(frozen=True)
class Member:
    """One size of a benchmark, as `trainclock list` shows it."""

    name: str
    parameters: int
    quality: tuple[QualityTarget, ...]
    target_source: TargetSource
    description: str = ""  # shape in a few words
    unit: str = "samples"  # the progress unit its throughput is counted in
    target_note: str = ""  # how the target was fixed, in a line


@dataclass(frozen=True)
class RunSettings:
    """The user's generic choices for a run (None: the member's default)."""

    data: str | None = None
    global_batch_size: int | None = None
    micro_batch_size: int | None = None
    compile: bool = False
    activation_checkpointing: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # the values of the workload's own flags (add_arguments)


class RunSpec(Protocol):
    """A member resolved for one run: the workload keeps its own fields; the commands read these."""

    name: str
    global_batch_size: int
    micro_batch_size: int
    eval_every_samples: int


class Workload(Protocol):
    """What the generic code asks of a benchmark. BenchmarkWorkload (workload/benchmark.py) implements
    it and declares optional class attributes a plugin on this bare protocol may leave out (readers
    take a default): `default_member`, the member commands mean when none is named (one benchmark
    declares it: the README's first run), `full_size_flags`, what `trainclock run <key>` needs
    beyond the key (the README's table), and `member_names()`, the members' names without building
    them (the registry resolves a name with it; without it, with members())."""

    key: str  # the MLPerf benchmark key (submission_benchmark)
    title: str  # how people name it
    full_size: str  # the member that `trainclock run <key>` means: MLPerf's closed configuration
    mlperf_round: str  # the MLPerf Training round whose rules it follows ("X.Y"): its logs say so, the review applies them

    def members(self) -> Sequence[Member]:
        """Every member (size or CPU tier), smallest first."""
        ...

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        """Nothing, or the workload's own `trainclock run` flags, added to this group of `run`'s parser
        when the command names the workload (none may clash with the generic flags); their values
        reach resolve and build_job as RunSettings.extra[dest]. A workload whose flags change what a
        run trains (not how it is laid out) names their dests in a `resumed_flags` tuple: a resume
        takes those over from the run it continues and refuses another value; the others (sharding,
        loader workers) may differ, as a resume on another world size needs."""
        ...

    def resolve(self, member: str, settings: RunSettings, layout: "Layout", device: torch.device) -> RunSpec:
        """The member's spec for this run, with the user's settings applied and checked: refuses
        (UsageError/ResourceError, one line saying what to do) a bad batch, a layout the model cannot
        be cut into, or a member that cannot fit the device. On the meta device (a dry run, which
        reads no data and measures the fit itself) only the batch and the layout are checked."""
        ...

    def build_job(self, spec: RunSpec, ctx: "ParallelContext", device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        """Data, model (parallelised for ctx, on device) and everything else the loop needs."""
        ...

    def build_model(self, spec: RunSpec, ctx: "ParallelContext", device: torch.device,
                    settings: RunSettings) -> nn.Module:
        """The model build_job trains, without its data: parallelised for ctx (distributed.parallelize)
        and initialised from the current random state (build_job seeds it first, and loads start
        weights its data brings). A model too large to build whole is built on the meta device and
        only this rank's shards are materialised on `device`; a meta `device` leaves it there (a dry
        run, distributed.dry_run, then materialises fake tensors)."""
        ...

    def optimizer(self, spec: RunSpec) -> "OptimizerSetup":
        """The optimizer the job trains with, from the spec alone."""
        ...

    def sample_loss(self, spec: RunSpec, model: nn.Module, rows: int,
                    device: torch.device) -> torch.Tensor | Sequence[torch.Tensor] | None:
        """The training loss of one micro-batch of `rows` made-up samples with the real data's
        shapes and dtypes (a pipelined model: one per stage this rank holds), for a dry run to
        measure activations on fake tensors; None where the model's work depends on the inputs'
        values."""
        ...

    def fetch_data(self) -> str | None:
        """Install the default data of the CPU members if missing; a line saying what was done."""
        ...

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        """Prepare a member's data (default or `data`) into its cache; a line saying what is there."""
        ...

    def cost(self, member: str) -> "WorkloadCost | None":
        """The planner's cost model of a member, or None where the workload has none."""
        ...

    def write_sample_data(self, member: str, folder: "Path", samples: int, seed: int) -> str:
        """Made-up data in the member's own on-disk format and shapes (for a full size: the official
        files' format, with samples of the real set's typical size) under `folder`: at least `samples`
        training samples and the smallest evaluation set the job accepts. Returns the --data value that
        runs the member on it. It measures the host pipeline at full size without the real data
        (benchmarks/host_pipeline.py) and feeds tests; its contents are random, so no target is
        reachable on it."""
        ...
