"""What the planner needs to know about a benchmark to predict its time-to-train, memory and cost
on a cluster: the workload cost interface. No model code: numbers and formulas only, so the
planner never builds a model (nor loads torch for one).

A benchmark's cost model (workloads/<name>/cost.py, reached through the registry's
`workload.cost(member)`) describes one member in generic terms; the planner owns everything about
the cluster (precision, sharding, schedules, links). How the planner uses each part:

- size: `trained_parameter_count` (default: `parameter_count`) sizes the gradients, master
  weights, optimizer states, data-parallel traffic and the optimizer update, `parameter_count` the weights;
  `layer_parameters` x `layers` + `other_parameters` is the same total split into what a pipeline
  cuts (identical repeated layers) and what it does not (embeddings, heads: the fullest pipeline
  stage is charged all of them).
- compute: `flops_per_sample` at a calibrated fraction of the accelerator's peak; its `weights`
  part (matmuls with parameters) runs at the plan's precision (fp8 included), its `other` part
  (matmuls of activations with activations, e.g. attention scores) at bf16, and is what selective
  recomputation recomputes.
- memory: `layer_activation_bytes` per layer and micro-batch, times the micro-batches the pipeline
  schedule keeps in flight; `output_bytes` on the last stage; `optimizer_state_bytes_per_parameter`
  on top of weights, gradients and fp32 master weights; the search tries `recompute_choices`.
- splitting: tensor parallelism must divide `tensor_parallel_units` (1: the model cannot be split
  that way); pipeline x virtual stages must divide `layers` (1: no pipeline). Every layer crosses
  `tp_collectives_per_layer` all-reduces of `boundary_values_per_sample` values per sample each
  way under tensor parallelism; a pipeline stage sends that many values per sample to the next.
- progress and convergence: `progress` is the codec of the progress the member's runs log (the
  job's Progress.codec, mllog.progress), so the plan and the log count alike; from it, MLPerf counts
  progress in a unit (`progress_unit`: tokens, epochs, or samples, also where the log counts
  steps), `units_per_sample` of it per sample;
  `convergence` gives, per global batch size, the units a run needs to reach the target (MLPerf's
  RCPs or trainclock's own reference runs); runs evaluate every `eval_every_samples` over
  `eval_samples` samples.

Non-transformer benchmarks fill the same terms: an image classifier has `tensor_parallel_units` 1
and `layers` 1 (data parallel only), all its FLOPs in `weights` and epochs as its unit (1/<training
images> epoch per image); a recommender puts its embedding tables in `other_parameters` and the
MLP in `layers`, and declares the tables model parallel:

- model-parallel parameters: `sharded_parameters` (part of the totals above) are split over every
  device by the model itself (embedding tables table- or row-wise): memory divides them over all
  devices, and the data-parallel gradient traffic, ZeRO and the dense optimizer update leave them
  out; `sharded_parameters_touched_per_sample` makes their update sparse (the rows a sample
  reads); `exchange_values_per_sample` values per sample cross devices by all-to-all each way,
  in the forward pass and again in the backward.
- `micro_batch_choices`: the micro-batches the layout search tries.

Hooks with a body here are optional: a cost model that subclasses WorkloadCost inherits these
defaults, which change nothing for a model without sharded parameters."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol, runtime_checkable

from trainclock.errors import DataError, UsageError
from trainclock.mllog.progress import ProgressCodec

RECOMPUTE = ("none", "selective", "full")  # what a layer keeps for its backward pass, see layer_activation_bytes


@dataclass(frozen=True)
class SampleFlops:
    """Training FLOPs (forward + backward, 1:2) of one sample."""

    weights: float  # matmuls with parameters: run at the plan's precision
    other: float = 0.0  # matmuls of activations with activations (attention): run at bf16

    @property
    def total(self) -> float:
        return self.weights + self.other


@dataclass(frozen=True)
class ConvergencePoints:
    """Progress units to reach the quality target at each global batch size measured."""

    points: tuple[tuple[int, float], ...]  # (global batch size, mean units to target), sorted by batch
    source: str  # where they come from, as printed


@runtime_checkable
class WorkloadCost(Protocol):
    """One benchmark member's cost model. Attributes may be plain attributes or properties."""

    name: str  # the member (<benchmark>-<size>)
    benchmark: str  # the MLPerf benchmark key it stands for: scoring rules, calibration data
    parameter_count: int  # all parameters, trained or frozen (see trained_parameter_count)
    layers: int  # identical repeated layers a pipeline cuts; pp x vp must divide it
    layer_parameters: float  # parameters of one of those layers
    other_parameters: float  # parameters outside them (embeddings, heads, final norms)
    tensor_parallel_units: int  # what tensor parallelism splits (attention heads); tp must divide it
    tensor_parallel_unit: str  # their name, plural, e.g. "attention heads"
    flops_per_sample: SampleFlops
    boundary_values_per_sample: float  # activation values that cross a layer boundary per sample
    optimizer_state_bytes_per_parameter: float  # per trained parameter, e.g. Adam: two fp32 moments = 8
    progress: ProgressCodec  # how the member's runs log their progress (its job's Progress.codec)
    sample_noun: str  # plural, as printed after a count: "sequences of 2048 tokens", "images"
    reference_batch_size: int  # the benchmark's default global batch size, in samples
    eval_every_samples: int  # training samples between evaluations
    eval_samples: int  # samples one evaluation runs forward

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        """Bytes one layer keeps for its backward pass, per device, for one micro-batch of
        `micro_batch` samples in 16-bit values (the planner doubles them for fp32 training);
        `recompute` is one of RECOMPUTE: none, selective (drop what is cheap to recompute),
        full (keep only the layer's input)."""
        ...

    @property
    def progress_unit(self) -> str:
        """What MLPerf counts progress in, from `progress`: "tokens", "epochs", "samples"."""
        return plan_progress(self.progress)[0]

    @property
    def units_per_sample(self) -> float:
        """Progress units (progress_unit) per sample, from `progress` (tokens per sequence where
        the benchmark counts tokens)."""
        return plan_progress(self.progress)[1]

    def output_bytes(self, micro_batch: int, tp: int) -> float:
        """Bytes of the model's output and its gradient on the last pipeline stage for one
        micro-batch (GPT: fp32 logits over the vocabulary). Default: none worth counting."""
        return 0.0

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        """The recomputation modes the layout search tries (a --layout can still ask for any).
        Default: all of RECOMPUTE."""
        return RECOMPUTE

    @property
    def tp_collectives_per_layer(self) -> int:
        """All-reduces per layer in the forward pass under tensor parallelism (as many again in
        the backward). Default: Megatron's 2 (after attention and after the MLP)."""
        return 2

    @property
    def trained_parameter_count(self) -> int:
        """Parameters the optimizer updates (a LoRA fine-tune's adapters); the rest of
        parameter_count is frozen: its weights are kept, but it has no gradients, master weights,
        optimizer states nor data-parallel gradient traffic. Counted as spread over the model like
        the parameters themselves. Default: all of parameter_count."""
        return self.parameter_count

    @property
    def sharded_parameters(self) -> float:
        """Parameters the model splits over every device instead of replicating them (sharded
        embedding tables); counted in parameter_count and in layer/other parameters too.
        Default: none."""
        return 0.0

    @property
    def sharded_parameters_touched_per_sample(self) -> float | None:
        """Sharded parameters one sample reads and its update writes (its embedding rows), or None:
        every sharded parameter is updated every step (a dense update). Default: None."""
        return None

    @property
    def exchange_values_per_sample(self) -> float:
        """Values one sample sends between devices each way by all-to-all when sharded_parameters
        are split (pooled embeddings forward, their gradients backward). Default: none."""
        return 0.0

    @property
    def sample_work_cv(self) -> float:
        """Coefficient of variation of one training sample's work (a detector's images differ in
        size and object count): each step then waits for the slowest data-parallel replica
        (planner step_time.straggler_seconds). Default: 0, every sample the same work."""
        return 0.0

    @property
    def micro_batch_choices(self) -> tuple[int, ...]:
        """Micro-batch sizes (samples per device and forward) the layout search tries.
        Default: 1, 2, 4, 8 (large models, long sequences)."""
        return (1, 2, 4, 8)

    def convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints | None:
        """Units to target by global batch size, or None when nothing is known (the user then gives
        the units to train). `mlperf_dir` locates the MLPerf data folder (rcps/) when called.
        Default: MLPerf's RCPs for `benchmark` in the round the cost model follows, see rcp_convergence."""
        return rcp_convergence(mlperf_dir(), self.benchmark, self.mlperf_round)

    @property
    def mlperf_round(self) -> str:
        """The MLPerf round whose reference points apply (its workload's mlperf_round)."""
        raise NotImplementedError(f"{type(self).__name__} names no MLPerf round (mlperf_round)")

    def measured_efficiency(self) -> tuple[float, str] | None:
        """(model FLOP utilization, where it comes from) of trainclock's own recorded runs of this
        member on this machine's CPU, for planning `this-cpu`; None when none are recorded."""
        return None


def plan_progress(codec: ProgressCodec) -> tuple[str, float]:
    """(unit, units per sample) a plan counts progress in, for a log that counts as `codec` says: what
    the log counts, in a unit no batch size changes. The progress unit where the log counts it (e.g.
    tokens), epochs where it counts epochs (samples_per_epoch samples each), else samples: a logged
    step is a global batch of them, and the plan picks the batch."""
    if codec.logged_in == "units":
        return codec.unit, codec.units_per_sample
    if codec.logged_in == "epochs":
        return "epochs", 1.0 / codec.samples_per_epoch
    return "samples", 1.0


def transformer_layer_activation_bytes(seq_len: int, micro_batch: int, hidden: int, heads: int, tp: int,
                                       sequence_parallel: bool, recompute: str) -> float:
    """What one transformer layer keeps for its backward pass, in 16-bit values (Korthikanti et al.
    2022, Table 2): s*b*h*(34/t + 5*a*s/(h*t)) with sequence parallelism, s*b*h*(10 + 24/t +
    5*a*s/(h*t)) without; selective recomputation drops the 5*a*s/h attention scores, full keeps
    only the layer's input."""
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    if recompute == "full":
        return 2 * s * b * h / (t if sequence_parallel else 1)
    per_token_width = 34 / t if sequence_parallel else 10 + 24 / t
    attention_scores = 5 * a * s / (h * t) if recompute == "none" else 0.0
    return s * b * h * (per_token_width + attention_scores)


def rcp_convergence(folder: Path, benchmark: str, round_: str) -> ConvergencePoints:
    """MLPerf's reference convergence points of `benchmark` as round `round_` ("X.Y") has them: the
    newest rcps/training_<round>/rcps_<benchmark>.json in `folder` not after that round, else the
    round's own from the installed rules package; the mean units to target of the reference runs
    at each batch size. (A later round's table may count other units: never used for an older one.)"""
    files = sorted((p for p in (folder / "rcps").glob(f"training_*/rcps_{benchmark}.json")
                    if _round_order(p.parent.name)[:2] <= _round_order(f"training_{round_}")),
                   key=lambda p: _round_order(p.parent.name))
    path = files[-1] if files else rules_rcp_file(benchmark, round_)
    if not path.is_file():
        raise DataError(f"no rcps/training_*/rcps_{benchmark}.json in {folder} nor in the mlperf_logging package")
    try:
        table = json.loads(path.read_text())
        points = sorted((int(p["BS"]), statistics.fmean(_units_to_converge(p))) for p in table.values())
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: unreadable reference convergence points ({e})") from None
    return ConvergencePoints(tuple(points), f"MLPerf RCPs {path.parent.name}")


def _units_to_converge(point: dict) -> list[float]:
    """A reference point's runs: "Epochs to converge" in the older rounds' tables, "samples to converge" in
    later rounds' tables of the benchmarks that count samples (as the rules package's checker reads them)."""
    return point["Epochs to converge"] if "Epochs to converge" in point else point["samples to converge"]


def rules_rcp_file(benchmark: str, round_: str) -> Path:
    """The reference convergence points of `benchmark` that the installed mlperf_logging package
    ships for round `round_` ("X.Y")."""
    from mlperf_logging import rcp_checker

    return Path(rcp_checker.__file__).parent / f"training_{round_}.0" / f"rcps_{benchmark}.json"


def _round_order(folder_name: str) -> tuple[int, ...]:
    """training_X.Y.Z -> (X, Y, Z): rounds in release order (numerically: 10.0 after 9.0)."""
    return tuple(int(x) for x in folder_name.removeprefix("training_").split("."))


@cache
def rules_rcp_table(benchmark: str, round_: str) -> tuple[dict, ...]:
    """The entries of round `round_`'s reference convergence points of `benchmark` (BS, Hyperparams,
    Epochs to converge) as the installed rules package ships them."""
    return tuple(json.loads(rules_rcp_file(benchmark, round_).read_text()).values())


def rcp_hyperparameters(benchmark: str, round_: str, global_batch_size: int, member: str) -> dict:
    """The Hyperparams of round `round_`'s reference convergence point of `benchmark` at this batch
    size; a UsageError naming the batch sizes there are where it has none (`member`: the one run)."""
    table = {entry["BS"]: entry["Hyperparams"] for entry in rules_rcp_table(benchmark, round_)}
    if global_batch_size not in table:
        raise UsageError(f"{member} has reference hyperparameters (RCPs) only at global batch sizes "
                         f"{', '.join(map(str, sorted(table)))}; pick one with --gbs")
    return table[global_batch_size]
