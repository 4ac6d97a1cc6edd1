"""The planner on this machine's CPU, calibrated on trainclock's own runs of a member (from the
results store), and tested on them run by run: each run predicted by a fit on the member's other
runs, trained as far as they needed (own_convergence), not as far as it did.

A stored run is split as a published log is (mlperf_data.LogTiming): steady training (the time
between one evaluation's end and the next one's start, over the steps between them), the
evaluations (eval_start to eval_stop), and the rest of the timed region (start-up and warm-up
inside it: the first interval's excess over steady steps, negative where its steps are cheaper).
The fit gives each part its number: the matmul efficiency that reproduces the steady step, the
fixed cost of an evaluation beyond its forward work (or its own efficiency, where it is faster),
and the run overhead. Each run is timed at the matmul peak it measured at its start: the
machine's speed at the time, known before its clock.

Runs are comparable only on the same kind of CPU (its name and the flags that set its matmul
speed: one Xeon name covers AMX machines and machines without bf16 instructions), precision and
intra-op threads."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import brentq
from scipy.stats import bootstrap

from trainclock.errors import DataError
from trainclock.planner.calibration import Calibrated, Request
from trainclock.planner.model.convergence import ConvergenceModel, eval_interval_samples
from trainclock.planner.model.hardware import THIS_CPU, Accelerator
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.predict import Prediction, predict
from trainclock.planner.model.step_time import Efficiency, eval_seconds, step_time
from trainclock.workload.cost_model import WorkloadCost

CPU_LAYOUT = {"recompute": "none", "zero": 0, "overlap": False}  # precision: what `trainclock run` would choose here
EFFICIENCY_RANGE = (1e-5, 1.0)
PARTS = ("training", "evaluations", "rest", "total")
MIN_PROGRESS_RUNS = 2  # stored runs of a tier that stand for its progress to target in their precision
CONFIDENCE = 0.95  # of the interval given for a tier's measured median time-to-train
SMALLEST_PART = 0.02  # a part under this share of the run is too small to judge in percent


@dataclass(frozen=True)
class OwnRun:
    """A successful `trainclock run` of a member, as the results store keeps it."""

    member: str
    label: str  # where it is from, as printed: the log's name and seed
    cpu: str  # the CPU it ran on, as device.system.cpu_identity names it
    precision: str  # "bf16" or "fp32", as trained
    threads: int  # intra-op threads of its process
    processes: int
    global_batch_size: int
    micro_batch: int  # samples per forward/backward (global batch over accumulation steps)
    time_to_train_s: float
    samples: float  # trained when it met the target
    peak_flops: float | None  # the matmul peak it measured in its precision (its MFU's denominator)
    # (samples trained before it, start, stop) of each evaluation, times in seconds from run_start
    eval_spans: tuple[tuple[float | None, float, float], ...] | None

    @property
    def group(self) -> tuple[str, str, int, int]:
        return self.member, self.precision, self.threads, self.processes


@dataclass(frozen=True)
class RunParts:
    """A run's timed region, part by part (seconds), and its steady step and mean evaluation."""

    training: float
    evaluations: float
    rest: float
    total: float
    step_s: float
    eval_s: float
    evaluation_count: int

    def as_dict(self) -> dict[str, float]:
        return dict(zip(PARTS, (self.training, self.evaluations, self.rest, self.total)))


def same_machine(run: OwnRun, cpu: str) -> bool:
    """Timed on a CPU like this one (`cpu`: its cpu_identity), in one process. Thread counts are
    a run's setting, not the machine's (a workload may set its own): runs are grouped by them."""
    return run.cpu == cpu and run.processes == 1


def calibration_runs(runs: Sequence[OwnRun], member: str, precision: str, threads: int) -> list[OwnRun]:
    """The runs a plan of `member` on this CPU calibrates on: those in `precision` with `threads`
    threads, else with the thread count most of them used (a workload that sets its own)."""
    mine = [r for r in runs if (r.member, r.precision) == (member, precision)]
    counts = Counter(r.threads for r in mine)
    chosen = threads if threads in counts else (counts.most_common(1)[0][0] if counts else None)
    return [r for r in mine if r.threads == chosen]


def measured_peaks(runs: Sequence[OwnRun], member: str | None = None,
                   threads: int = 0) -> tuple[dict[str, float], str]:
    """This CPU's matmul peak per precision as its stored runs measured it (the median: one
    measurement on a busy machine can be off 2-fold), and where it comes from. With `member`, the
    runs a plan of it calibrates on (calibration_runs at `threads`), where it has any: each run's
    efficiency is relative to its own peak, and the thread count moves the peak (1-thread runs
    measure about half the 2-thread peak)."""
    whose = "the stored runs'"
    if member is not None:
        chosen = [r for p in ("bf16", "fp32") for r in calibration_runs(runs, member, p, threads)]
        if chosen:
            runs, whose = chosen, f"the stored {member} runs'"
    by_precision: dict[str, list[float]] = {}
    for run in runs:
        if run.peak_flops:
            by_precision.setdefault(run.precision, []).append(run.peak_flops)
    peaks = {p: statistics.median(found) for p, found in by_precision.items()}
    counts = ", ".join(f"{len(found)} in {p}" for p, found in by_precision.items())
    return peaks, f"the median of {whose} own measurements ({counts})"


def cpu_plan(run: OwnRun) -> Plan:
    """The plan a stored run trained with: one process, its micro-batch and precision."""
    return replace(Plan(), micro_batch=run.micro_batch, precision=run.precision, **CPU_LAYOUT)


def parts(run: OwnRun, cost: WorkloadCost) -> RunParts | None:
    """The run's parts; None without its evaluations' times or with fewer than one evaluation."""
    spans = run.eval_spans
    if not spans:
        return None
    steps = run.samples / run.global_batch_size
    # offline evaluation (EvalSchedule.offline) scores saved models after run_stop: none of it is timed
    spans = [span for span in spans if span[1] < run.time_to_train_s]
    if not spans:
        step_s = run.time_to_train_s / steps
        return RunParts(run.time_to_train_s, 0.0, 0.0, run.time_to_train_s, step_s, 0.0, 0)
    evals_s = sum(b - a for _, a, b in spans)
    interval = eval_interval_samples(cost, run.global_batch_size)  # where a log does not count samples
    # the first interval carries start-up and warm-up: steady steps are timed between evaluations
    gaps = []
    for (n0, _, b0), (n1, a1, _) in zip(spans, spans[1:]):
        samples = n1 - n0 if n0 is not None and n1 is not None else interval
        if samples > 0:
            gaps.append((a1 - b0) / (samples / run.global_batch_size))
    if gaps:
        step_s = statistics.median(gaps)
    else:  # one evaluation: the run less it is the only measure of a step
        step_s = (run.time_to_train_s - evals_s) / steps
    training = steps * step_s
    return RunParts(training, evals_s, run.time_to_train_s - training - evals_s, run.time_to_train_s, step_s,
                    evals_s / len(spans), len(spans))


@dataclass(frozen=True)
class OwnFit:
    efficiency: Efficiency
    runs: int  # fitted on
    source: str
    micro_batch: int  # the runs' (their efficiency was measured at it)


def at_its_peak(accelerator: Accelerator, run: OwnRun) -> Accelerator:
    """`accelerator` with the matmul peak `run` measured at its start, where it did: this VM's speed
    drifts by a third over an hour (a shared host), and a run's steps and its own peak measurement
    move together (one tier: steps 75-115 ms at peaks of 2.6-2.0 TFLOP/s, their product within 8%)."""
    if not run.peak_flops:
        return accelerator
    return replace(accelerator, peak_flops={**accelerator.peak_flops, run.precision: run.peak_flops})


def _efficiency_for(seconds: float, modelled: Callable[[float], float]) -> float:
    """The matmul efficiency at which `modelled` (seconds, falling as efficiency rises) takes
    `seconds`: the root within EFFICIENCY_RANGE, else its nearer end."""
    low, high = EFFICIENCY_RANGE
    if modelled(high) >= seconds:
        return high
    if modelled(low) <= seconds:
        return low
    return brentq(lambda e: modelled(e) / seconds - 1, low, high, rtol=1e-6)


def fit(cost: WorkloadCost, accelerator: Accelerator, runs: Sequence[OwnRun]) -> OwnFit | None:
    """The member's efficiency on this CPU from `runs` (one member, precision and thread count),
    each at the peak it measured (at_its_peak): the median of the matmul efficiencies that
    reproduce each run's steady step; the evaluation's fixed cost beyond its modelled forward work,
    or its own efficiency where it is faster than that; and the median rest of the timed region.
    None when no run has its evaluations' times."""
    timed = [(run, p) for run in runs if (p := parts(run, cost)) is not None]
    if not timed:
        return None
    run = timed[0][0]
    plan = cpu_plan(run)
    gbs = run.global_batch_size

    def steady(one: OwnRun, one_parts: RunParts) -> float:  # the efficiency of one run's steady step
        machine = at_its_peak(accelerator, one)
        return _efficiency_for(one_parts.step_s, lambda e: step_time(cost, gbs, plan, machine, Efficiency(e)).step_s)

    compute = statistics.median(steady(r, p) for r, p in timed)
    forward = [eval_seconds(cost, plan, at_its_peak(accelerator, r), Efficiency(compute)) for r, _ in timed]
    # an evaluation slower than its forward work at training's efficiency has a fixed cost
    # beyond it; a faster one ran its forward nearer the peak (time is inverse to efficiency)
    ratios = [p.eval_s / f for (_, p), f in zip(timed, forward) if f > 0]
    ratio = statistics.median(ratios) if ratios else 1.0  # no forward work modelled: all fixed cost
    if 0 < ratio < 1:
        eval_compute, eval_overhead = min(EFFICIENCY_RANGE[1], compute / ratio), 0.0
    else:
        eval_compute, eval_overhead = None, max(0.0, statistics.median(p.eval_s - f for (_, p), f in zip(timed, forward)))
    # not floored at zero: where a step's work grows as the model learns, the first interval's steps
    # are cheaper than the steady ones and the rest is negative (a detector's tiers: the mask head trains
    # on the positive RoIs, more of them as the RPN learns; first interval 10-15% faster per step)
    run_overhead = statistics.median(p.rest for _, p in timed)
    what = f"{run.precision}, {run.threads} thread{'s' if run.threads > 1 else ''}"
    return OwnFit(Efficiency(compute, eval_overhead, run_overhead, eval_compute), len(timed),
                  f"{len(timed)} stored {run.member} run{'s' if len(timed) > 1 else ''} on this CPU ({what})",
                  statistics.median_low(r.micro_batch for r, _ in timed))


def predict_run(cost: WorkloadCost, accelerator: Accelerator, run: OwnRun, efficiency: Efficiency,
                convergence: ConvergenceModel | None, samples: float | None = None) -> Prediction:
    """The model's run of `run`'s setting, at the peak it measured at its start (the machine's
    speed then, known before its clock started): as far as `convergence` says, or `samples` (its own)."""
    units = None if samples is None else samples * cost.units_per_sample
    return predict(cost, at_its_peak(accelerator, run), run.global_batch_size, cpu_plan(run), efficiency, convergence,
                   units)


@dataclass(frozen=True)
class RunCheck:
    """One stored run against the model fitted on the member's other runs."""

    run: OwnRun
    measured: RunParts | None
    predicted: Prediction  # to the convergence model's progress
    timed: Prediction  # to the run's own progress: the time model alone
    # its predicted times to train at the progress of each of the other runs: the outcomes the
    # model expects of it, the seed's luck included (its own prediction's time where none stand)
    outcomes: tuple[float, ...]

    @property
    def error(self) -> float:
        return self.predicted.time_to_train_s / self.run.time_to_train_s - 1

    @property
    def timed_error(self) -> float:
        return self.timed.time_to_train_s / self.run.time_to_train_s - 1

    def part_error(self, part: str) -> float | None:
        if self.measured is None:
            return None
        predicted = dict(zip(PARTS, (self.timed.train_s, self.timed.evals_s, self.timed.run_overhead_s,
                                     self.timed.time_to_train_s)))
        measured = self.measured.as_dict()[part]
        return predicted[part] / measured - 1 if measured > SMALLEST_PART * self.run.time_to_train_s else None


@dataclass(frozen=True)
class MemberCheck:
    """A member's runs (one precision and thread count) against leave-one-out predictions: the
    member's time-to-train is the median of its runs as measured, and the median of all its runs'
    outcomes as predicted. Not the median of the runs' predictions: each is at the median progress,
    and the median of times is not the time at the median progress where runs differ in speed too
    (one tier: 2 of 8 runs met the target one evaluation early, and not the slowest ones)."""

    member: str
    precision: str
    threads: int
    rows: tuple[RunCheck, ...]
    samples_source: str

    @property
    def measured_s(self) -> float:
        return statistics.median(r.run.time_to_train_s for r in self.rows)

    @property
    def measured_interval(self) -> tuple[float, float]:
        """The CONFIDENCE interval of the measured median (bootstrap over the tier's runs): where
        the median of as many other runs on this machine may fall, so how exactly it is known."""
        times = np.array([r.run.time_to_train_s for r in self.rows])
        if len(set(times)) < 2:
            return float(times[0]), float(times[0])
        found = bootstrap((times,), np.median, confidence_level=CONFIDENCE, method="percentile",
                          rng=np.random.default_rng(0)).confidence_interval
        return float(found.low), float(found.high)

    @property
    def predicted_s(self) -> float:
        return statistics.median(t for r in self.rows for t in r.outcomes)

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1

    def mean_abs(self, errors: Sequence[float | None]) -> float | None:
        found = [abs(e) for e in errors if e is not None]
        return statistics.fmean(found) if found else None


def check_run(cost: WorkloadCost, accelerator: Accelerator, run: OwnRun, efficiency: Efficiency,
              convergence: ConvergenceModel, others: Sequence[OwnRun] = ()) -> RunCheck:
    """`run` against the model fitted on other runs (`efficiency`): to `convergence`'s progress, to
    its own, and at the progress of each of `others` (the runs that progress stands for; none where
    it is not theirs, the prediction's own time then)."""
    predicted = predict_run(cost, accelerator, run, efficiency, convergence)
    outcomes = (tuple(predict_run(cost, accelerator, run, efficiency, None, o.samples).time_to_train_s for o in others)
                or (predicted.time_to_train_s,))
    return RunCheck(run, parts(run, cost), predicted, predict_run(cost, accelerator, run, efficiency, None, run.samples),
                    outcomes)


def own_convergence(cost: WorkloadCost, runs: Sequence[OwnRun], reference: ConvergenceModel) -> ConvergenceModel:
    """How far the member trains to its target in the runs' precision on this CPU: the median
    progress of its stored runs, where at least MIN_PROGRESS_RUNS of them trained at one batch
    size; else the reference runs' (`reference`). Precision moves where a tier converges: bf16
    runs of sd-tiny needed 2,000-3,200 samples, its fp32 reference runs 1,600 (median)."""
    mine = [r for r in runs if r.member == cost.name]
    if len(mine) < MIN_PROGRESS_RUNS or len({r.global_batch_size for r in mine}) != 1:
        return reference
    units = statistics.median(r.samples for r in mine) * cost.units_per_sample
    return replace(reference, points=((mine[0].global_batch_size, units),),
                   source=f"median of {len(mine)} stored {cost.name} runs in {mine[0].precision} on this CPU")


def leave_one_out(runs: Sequence[OwnRun], accelerator: Accelerator, cost_of: Callable[[str], WorkloadCost],
                  convergence_of: Callable[[WorkloadCost], ConvergenceModel]) -> list[MemberCheck]:
    """Every group of at least two runs (member, precision, threads, processes), each run
    predicted by a fit on the group's others, trained as far as they did (own_convergence; the
    reference runs' progress where fewer than MIN_PROGRESS_RUNS others are stored)."""
    groups: dict[tuple, list[OwnRun]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    checks = []
    for (member, precision, threads, _), members_runs in sorted(groups.items()):
        if len(members_runs) < 2:
            continue
        cost = cost_of(member)
        reference = convergence_of(cost)
        rows, sources = [], set()
        for run in members_runs:
            rest = [o for o in members_runs if o is not run]
            others = fit(cost, accelerator, rest)
            if others is None:
                continue
            convergence = own_convergence(cost, rest, reference)
            sources.add("the tier's other stored runs" if convergence is not reference else reference.source)
            rows.append(check_run(cost, accelerator, run, others.efficiency, convergence,
                                  rest if convergence is not reference else ()))
        if rows:
            checks.append(MemberCheck(member, precision, threads, tuple(rows), "; ".join(sorted(sources))))
    return checks


def own_runs_efficiency(cost: WorkloadCost) -> tuple[Efficiency, str]:
    """This CPU's efficiency: what trainclock's own recorded runs of the workload reached, measured
    against the same matmul peak the planner measures for this-cpu (the cost model's records)."""
    measured = cost.measured_efficiency()
    if measured is None:
        raise DataError(f"no trainclock run of {cost.name} (or of its benchmark's other members) records an MFU; "
                        "give --efficiency F for this-cpu")
    mfu, source = measured
    return Efficiency(mfu), source


class OwnRunsSource:
    """The calibration source for this machine's CPU (accelerator this-cpu, no --stack): the
    stored runs of the member at this precision and thread count, or the MFU its reference runs
    recorded where none is stored; --efficiency keeps the CPU's habits."""

    def __init__(self, runs: Sequence[OwnRun], reference_convergence: Callable[[], ConvergenceModel]) -> None:
        self.runs = runs
        self.reference_convergence = reference_convergence

    def calibrate(self, request: Request) -> Calibrated | None:
        if request.accelerator.id != THIS_CPU or request.stack is not None:
            return None
        import torch  # lazily, as hardware.this_cpu: planning a cluster never loads torch

        from trainclock.device.peak import resolve_precision

        cost = request.cost
        precision = resolve_precision("auto", torch.device("cpu"))  # fp32 on a CPU without bf16 instructions
        template = replace(Plan(), **CPU_LAYOUT, precision=precision)
        if request.efficiency:
            return Calibrated(Efficiency(request.efficiency), template, "given (--efficiency)")
        chosen = calibration_runs(self.runs, cost.name, precision, torch.get_num_threads())
        stored = fit(cost, request.accelerator, chosen)
        if stored is None:  # no stored run on this CPU: the reference runs' MFU
            reference, source = own_runs_efficiency(cost)
            return Calibrated(reference, template, source)
        return Calibrated(stored.efficiency, template, stored.source, {"micro_batch": stored.micro_batch},
                          own_convergence(cost, chosen, self.reference_convergence()))
