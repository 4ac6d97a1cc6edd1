"""Calibration of every benchmark on the published MLPerf scores (shared/mlperf-suite's
published_v3.1_scores.csv: 194 entries of the nine benchmarks from the official summarizer).

The table gives, per entry, the benchmark, the accelerator and its count and the official score,
not the batch size or the layout. Each entry is therefore planned as the planner plans a user's
question: the benchmark's full-size cost model (through the registry), MLPerf's reference
convergence points, and the layout and batch size the search finds fastest, in bf16 with the
generic software habits (data parallel with overlapped gradient sync for models that fit one
device), on the nodes the table gives (number_of_nodes: a system of smaller servers than the
catalogue's crosses the network sooner). What the calibration fits, per benchmark and
accelerator: the matmul efficiency (a fraction of the bf16 peak), to the scores in log space;
and per benchmark, the fixed cost of an evaluation, to the evaluations timed in the one result
folder of the benchmark in shared/ (Dell's 8 x H100 server), which accelerators without such a
log borrow.

Leave-one-out predicts each entry from a fit on the other entries of its benchmark and
accelerator (the timing log too is left out with its own entry). Entries on CPUs only (no
accelerator), on accelerators missing from the catalogue and in the open division are left out
and counted; the entries of the benchmark result_files calibrates on (the one submissions.toml
names) have their own, layout-aware calibration (result_files.py)."""

from __future__ import annotations

import csv
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from scipy.optimize import least_squares

from trainclock.errors import DataError, UsageError
from trainclock.mllog.reader import read_events
from trainclock.planner.calibration import Calibrated, Request
from trainclock.planner.calibration.mlperf_data import shared_folder, table_benchmark, table_title
from trainclock.planner.model import search
from trainclock.planner.model.collectives import LINK_EFFICIENCY
from trainclock.planner.model.convergence import ConvergenceModel, load_convergence
from trainclock.planner.model.hardware import Accelerator, by_alias
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.predict import Prediction, predict
from trainclock.planner.model.published_layouts import PublishedLayout, published_layout, published_layouts
from trainclock.planner.model.step_time import Efficiency, eval_seconds, exchange_crosses_nodes
from trainclock.planner.model.workload_view import cost_model
from trainclock.workload import registry
from trainclock.workload.cost_model import WorkloadCost

ENV_VAR = "TRAINCLOCK_MLPERF_SUITE"
SCORES_CSV = "published_v3.1_scores.csv"
GENERIC = {"sequence_parallel": False, "recompute": "none", "zero": 0, "overlap": True}
DATA_PARALLEL = {"tp": 1, "pp": 1, "zero": 0}
START_EFFICIENCY = 0.3  # where the fit starts, and the efficiency the search ranks layouts with
UNKNOWN_BATCH_TIE = 0.01  # predicted times this close (fraction) do not tell an unknown batch
# Above 1 where a cost model counts FLOPs the real runs skip (padding: a language model's submissions
# pack or unpad sequences, about half of a 512-token sample); the tables flag such fits.
MAX_EFFICIENCY = 2.0
MIN_EXCHANGE_NETWORK = 0.05  # lower bound of the fitted all-to-all share of the network's line rate
MAX_STEP_OVERHEAD_S = 0.05  # bound of the fitted fixed cost per step
STEP_OVERHEAD_PRIOR = 0.01  # weight of the pull to no fixed cost, against log errors of the scores
SEARCHED = "searched"  # an entry's layout: the fastest the search found, where no configuration file gives it
OVERCOUNT_NOTE = " (above 100%: the cost model counts FLOPs the submissions skip, such as padding)"


def suite_dir(explicit: Path | None = None) -> Path:
    folder, where = shared_folder(explicit, ENV_VAR, "mlperf-suite", SCORES_CSV)
    if folder is None:
        raise DataError(f"no {SCORES_CSV} in {where}; set {ENV_VAR} to a folder laid out as shared/mlperf-suite")
    return folder


@dataclass(frozen=True)
class ScoreRow:
    benchmark: str
    division: str
    submitter: str
    system: str
    accelerator_name: str
    count: int
    score_minutes: float
    nodes: int = 1
    round: str = ""  # the MLPerf round the score was published in, as the table gives it: its logs are under v<round>/

    @property
    def key(self) -> str:
        return f"{self.submitter}/{self.system}"

    def on_its_nodes(self, accelerator: Accelerator) -> Accelerator:
        """The accelerator as this system holds it: fewer per node than the catalogue's usual
        server where the table says so (Dell's 2 x XE8640 are two nodes of 4 H100, whose 8-GPU
        groups cross the network), so that its collectives take the links it really has."""
        per_node = self.count // self.nodes if self.nodes > 0 and self.count % self.nodes == 0 else 0
        if 0 < per_node < accelerator.accelerators_per_node:
            return replace(accelerator, accelerators_per_node=per_node)
        return accelerator


def read_scores(folder: Path) -> list[ScoreRow]:
    path = folder / SCORES_CSV
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        return [ScoreRow(r["benchmark"], r["division"], r["submitter"], r["system"], r["accelerator_model_name"],
                         int(r["accelerators_count"]), float(r["official_score_minutes"]),
                         int(float(r["number_of_nodes"])), r["round"])  # nodes written "1.0" in places
                for r in rows]
    except (OSError, UnicodeDecodeError, csv.Error, KeyError, ValueError, TypeError) as e:
        raise DataError(f"{path}: unreadable published scores ({type(e).__name__}: {e}); it should be the CSV "
                        "shipped in shared/mlperf-suite") from None


@dataclass(frozen=True)
class EvalTiming:
    """The evaluations inside the timed region of a result folder's runs (eval_start to eval_stop,
    paired in order; evaluations a benchmark logs after run_stop are outside it). Where
    training resumes (block_start or epoch_start) before an evaluation's eval_stop, the evaluation
    is asynchronous: it stopped training only until then (`blocking_s`), and the rest, its scoring,
    ran beside the next interval's training (`async_s`, the mean over such evaluations; the
    detection references' COCO scoring)."""

    system: str
    count: int  # accelerators of the system whose logs these are
    mean_eval_s: float
    evaluations: int
    blocking_s: float | None = None  # mean time training waits for an evaluation (default: mean_eval_s)
    async_s: float = 0.0  # mean scoring time after training resumed, over the asynchronous evaluations

    @property
    def stopping_s(self) -> float:
        return self.mean_eval_s if self.blocking_s is None else self.blocking_s


RESUME_KEYS = ("block_start", "epoch_start")  # training goes on


def eval_timing(folder: Path, system: str, count: int) -> EvalTiming | None:
    durations, blocking, scoring = [], [], []
    for path in sorted(folder.glob("result_*.txt")):
        events, _malformed = read_events(path)
        times = defaultdict(list)
        for e in events:
            times[e.key].append(e.time_ms)
        if not times["run_start"] or not times["run_stop"]:
            continue
        start, stop = min(times["run_start"]), max(times["run_stop"])
        resumes = sorted(t for key in RESUME_KEYS for t in times[key])
        for a, b in zip(sorted(times["eval_start"]), sorted(times["eval_stop"])):
            if start <= a <= b <= stop:
                durations.append((b - a) / 1000)
                resumed = next((t for t in resumes if a < t < b), None)
                blocking.append(((b if resumed is None else resumed) - a) / 1000)
                if resumed is not None:
                    scoring.append((b - resumed) / 1000)
    if not durations:
        return None
    return EvalTiming(system, count, statistics.fmean(durations), len(durations), statistics.fmean(blocking),
                      statistics.fmean(scoring) if scoring else 0.0)


@dataclass
class Entry:
    row: ScoreRow
    accelerator: Accelerator
    prediction: Prediction  # at the start efficiency: the layout and batch size it ran, or the search chose
    layout_source: str = SEARCHED

    def predicted_minutes(self, efficiency: Efficiency) -> float:
        p = self.prediction
        return predict(p.cost, p.accelerator, p.global_batch_size, p.plan, efficiency,
                       samples=p.samples).time_to_train_s / 60


@dataclass
class Benchmark:
    key: str
    cost: WorkloadCost
    convergence: ConvergenceModel
    groups: dict[str, list[Entry]] = field(default_factory=dict)  # by accelerator id
    timing: EvalTiming | None = None
    timing_accelerator: str | None = None
    timing_entry: Entry | None = None


@dataclass
class SuiteData:
    benchmarks: dict[str, Benchmark]
    left_out: Counter  # why entries are not calibrated on


def template(accelerator: Accelerator) -> Plan:
    return replace(Plan(), precision="bf16" if "bf16" in accelerator.peak_flops else "fp32", **GENERIC)


def load_suite(folder: Path, catalogue: dict[str, Accelerator], mlperf_dir, only: str | None = None,
               published_layouts: bool = True) -> SuiteData:
    """Every calibratable entry, planned at the start efficiency. `only`: one benchmark key;
    `published_layouts` False plans every entry by the search, as if no configuration file said
    how it ran (to measure what the files change)."""
    rows = read_scores(folder)
    left_out: Counter = Counter()
    benchmarks: dict[str, Benchmark] = {}
    known = {w.key for w in registry.workloads()}
    for row in rows:
        if only is not None and row.benchmark != only:
            continue
        if row.benchmark == table_benchmark():
            left_out[f"{table_title()}: calibrated with its layouts and logs (plan --validate's first tables)"] += 1
            continue
        if row.division != "closed":
            left_out["open division"] += 1
            continue
        if row.count == 0:
            left_out["CPUs only (no accelerator)"] += 1
            continue
        if row.benchmark not in known:
            left_out[f"{row.benchmark}: no workload in this installation"] += 1
            continue
        try:
            accelerator = by_alias(catalogue, row.accelerator_name)
        except DataError:
            left_out[f"accelerator not in the catalogue: {row.accelerator_name}"] += 1
            continue
        bench = benchmarks.get(row.benchmark)
        if bench is None:
            try:
                cost = cost_model(row.benchmark)
            except UsageError:
                left_out[f"{row.benchmark}: no cost model"] += 1
                continue
            bench = benchmarks[row.benchmark] = Benchmark(row.benchmark, cost, load_convergence(cost, mlperf_dir))
        logged = logged_batch(_result_folder(folder, row, bench.key)) if published_layouts else None
        entry = _plan_entry(bench, row, row.on_its_nodes(accelerator), published_layouts, logged)
        if entry is None:
            left_out[f"{row.benchmark}: no layout fits {row.count} x {accelerator.id}"] += 1
            continue
        bench.groups.setdefault(accelerator.id, []).append(entry)
    for bench in benchmarks.values():
        _attach_timing(bench, folder)
    return SuiteData(benchmarks, left_out)


def _result_folder(folder: Path, row: ScoreRow, benchmark: str) -> Path:
    return folder / f"v{row.round}" / row.submitter / "results" / row.system / benchmark


@dataclass(frozen=True)
class LoggedBatch:
    """The batch an entry's own result logs record (MLPerf's global_batch_size and
    gradient_accumulation_steps keys, in its first result file)."""

    global_batch_size: int
    accumulation: int = 1
    source: str = ""

    def micro_batch(self, replicas: int) -> int | None:
        per_step = replicas * self.accumulation
        return self.global_batch_size // per_step if self.global_batch_size % per_step == 0 else None


def logged_batch(folder: Path) -> LoggedBatch | None:
    """The batch an entry ran where its result folder is in shared/ (None where it is not, or its
    log records no global_batch_size)."""
    files = sorted(folder.glob("result_*.txt")) if folder.is_dir() else []
    if not files:
        return None
    values = {}
    for e in read_events(files[0])[0]:
        if e.key in ("global_batch_size", "gradient_accumulation_steps") and e.key not in values:
            values[e.key] = e.value
    try:
        gbs, accumulation = int(values["global_batch_size"]), int(values.get("gradient_accumulation_steps") or 1)
    except (KeyError, TypeError, ValueError):
        return None
    return LoggedBatch(gbs, max(1, accumulation), f"{files[0].parent.name}/{files[0].name} (logged batch)") \
        if gbs > 0 else None


def _plan_entry(bench: Benchmark, row: ScoreRow, accelerator: Accelerator, use_published: bool = True,
                logged: LoggedBatch | None = None) -> Entry | None:
    """The batch and layout the submission ran where a configuration file gives them (NVIDIA's,
    planner/model/published_layouts.toml); else the batch the entry's own logs in shared/ record
    (global_batch_size, and the per-device batch where gradient_accumulation_steps says how many
    micro-batches a step runs), data parallel; else plain data parallelism where the model fits one device,
    as the submissions of these models run; a search at one guessed efficiency would otherwise pick
    sharding or a pipeline whose traffic only that efficiency hides, and the fit could not move the
    time (a model went FSDP). Where the search's batches tie, the one nearest the published batch on
    the accelerator (_unknown_batch)."""
    published = published_layout(bench.key, accelerator.id, row.count) if use_published else None
    if published is not None:
        try:
            found = search.search(bench.cost, accelerator, row.count, Efficiency(START_EFFICIENCY),
                                  template(accelerator), {**DATA_PARALLEL, **published.layout},
                                  published.global_batch_size, bench.convergence)
        except UsageError:  # its batch lies outside the convergence data
            found = None
        if found is not None and found.ranked:
            return Entry(row, accelerator, found.ranked[0], published.source)
    if published is None and logged is not None:
        micro_batch = logged.micro_batch(row.count)
        for given in ([{**DATA_PARALLEL, "micro_batch": micro_batch}] if micro_batch else []) + [DATA_PARALLEL]:
            try:
                found = search.search(bench.cost, accelerator, row.count, Efficiency(START_EFFICIENCY),
                                      template(accelerator), given, logged.global_batch_size, bench.convergence)
            except UsageError:  # its batch lies outside the convergence data
                break
            if found.ranked:
                return Entry(row, accelerator, found.ranked[0], logged.source)
    nearest = nearest_published(bench.key, accelerator.id, row.count) if use_published and logged is None else None
    for given in (DATA_PARALLEL, {}):
        found = search.search(bench.cost, accelerator, row.count, Efficiency(START_EFFICIENCY), template(accelerator),
                              given, None, bench.convergence)
        if found.ranked:
            return Entry(row, accelerator, *_unknown_batch(found.ranked, nearest))
    return None


def _unknown_batch(ranked: list[Prediction], nearest: PublishedLayout | None) -> tuple[Prediction, str]:
    """The plan for an entry whose batch nothing records, from the search's ranking at the start
    efficiency. Batches whose predicted times lie within UNKNOWN_BATCH_TIE of the fastest are not told
    apart by the model (a per-sample cost the same at each, the convergence points a fraction of a
    percent apart), yet their step counts can differ twofold, and the fit reads a fixed cost per
    step from step counts. Among those, the one nearest (by ratio) the global batch a published
    configuration ran on this accelerator at the nearest scale, the only record of what batch the
    submissions there choose; with none, the fastest."""
    best = ranked[0]
    if nearest is None:
        return best, SEARCHED
    tied = [p for p in ranked if p.time_to_train_s <= best.time_to_train_s * (1 + UNKNOWN_BATCH_TIE)]
    chosen = min(tied, key=lambda p: abs(math.log(p.global_batch_size / nearest.global_batch_size)))
    if chosen.global_batch_size == best.global_batch_size:
        return best, SEARCHED
    return chosen, (f"{SEARCHED}, batch {chosen.global_batch_size:,} as near {nearest.global_batch_size:,} "
                    f"({nearest.count} x, {nearest.source.rsplit('/', 1)[-1]})")


def nearest_published(benchmark: str, accelerator_id: str, count: int) -> PublishedLayout | None:
    """The published layout of `benchmark` on `accelerator_id` nearest `count` (by ratio; the smaller
    on a tie), whose global batch an entry of unknown batch is planned with."""
    rows = published_layouts(benchmark, accelerator_id)
    return min(rows, key=lambda p: (abs(math.log(count / p.count)), p.count)) if rows else None


def _attach_timing(bench: Benchmark, folder: Path) -> None:
    """The benchmark's one result folder in shared/ whose entry is in the table."""
    for accelerator_id, entries in bench.groups.items():
        for entry in entries:
            logs = _result_folder(folder, entry.row, bench.key)
            if logs.is_dir():
                timing = eval_timing(logs, entry.row.key, entry.row.count)
                if timing is not None:
                    bench.timing, bench.timing_accelerator, bench.timing_entry = timing, accelerator_id, entry
                    return


def replica_batch(entry: Entry) -> int:
    """The samples one data-parallel replica trains per optimizer step (its micro-batches together)."""
    p = entry.prediction
    return p.global_batch_size // p.plan.layout.dp


def step_overhead_identifiable(entries: Collection[Entry]) -> bool:
    """Whether the entries can tell a step's fixed cost from its per-sample cost: only where they
    train different batches per replica per step. Where all run one (a benchmark whose small
    entries all train 12 images per GPU), a fixed cost per step and the per-sample cost
    trade against each other exactly but for second-order terms (the wait for the slowest of 4 or of
    8 replicas), which, fitted on, set the fixed cost anywhere between none and its bound: the fit
    holds it at none instead (GroupFit.step_overhead_fitted)."""
    return len({replica_batch(e) for e in entries}) > 1


@dataclass(frozen=True)
class GroupFit:
    efficiency: Efficiency
    fitted_on: tuple[str, ...]  # entry keys
    overhead_source: str
    # False where the entries fitted on all train one batch per replica, which cannot tell a fixed
    # cost per step from the per-sample cost: held at none (step_overhead_identifiable)
    step_overhead_fitted: bool = True


def fit_group(bench: Benchmark, accelerator_id: str, exclude: Collection[str] = ()) -> GroupFit:
    """The matmul efficiency of one accelerator's entries of a benchmark (all but those whose keys
    are in `exclude`), with the evaluation fitted to the benchmark's timing log when it is this
    accelerator's and its entry is not excluded, else borrowed from a fit of the log's accelerator.

    An evaluation is work spread over the data-parallel replicas (the validation set's forward
    passes, at a fitted fraction of peak: the cost models count the training crop's FLOPs, not a
    sliding window's or a detector's post-processing) plus a fixed cost. One log at one scale
    cannot split the two, so the fixed cost is fitted to the scores, whose scales differ in
    replicas, and bounded by the log's evaluation time. Where the log shows training resuming
    before eval_stop, only the time until then is that evaluation; the rest, scoring beside training,
    is carried as measured (Efficiency.eval_async_s): the host's work, whatever the replicas."""
    entries = [e for e in bench.groups[accelerator_id] if e.row.key not in exclude]
    if not entries:
        raise ValueError("nothing to fit")
    own_log = (bench.timing is not None and bench.timing_accelerator == accelerator_id
               and bench.timing_entry.row.key not in exclude)
    borrowed: Efficiency | None = None
    source = "no evaluation log: 0 s"
    if own_log:
        source = f"fitted to {bench.timing.system}'s log"
    elif bench.timing is not None and bench.timing_entry.row.key not in exclude:
        borrowed = fit_group(bench, bench.timing_accelerator).efficiency
        source = f"borrowed from {bench.timing_accelerator} ({bench.timing.system}'s log)"

    # the all-to-all's share of the network's line rate is fitted only where an entry's exchange
    # crosses nodes: elsewhere nothing depends on it (it stays the all-reduce's)
    exchange = any(exchange_crosses_nodes(e.prediction.cost, e.prediction.plan, e.accelerator) for e in entries)
    step_fixed = step_overhead_identifiable(entries)

    # x: matmul efficiency, fixed cost per step, then with its own log the evaluation's efficiency
    # and fixed cost, then where fitted the all-to-all's share of the network (last)
    def efficiency(x) -> Efficiency:
        compute, step_overhead = float(x[0]), float(x[1]) if step_fixed else 0.0
        network = float(x[-1]) if exchange else None
        if own_log:
            return Efficiency(compute, float(x[3]), eval_compute=float(x[2]), step_overhead_s=step_overhead,
                              eval_async_s=bench.timing.async_s, exchange_network=network)
        if borrowed is not None:
            return Efficiency(compute, borrowed.eval_overhead_s, eval_compute=borrowed.eval_compute,
                              step_overhead_s=step_overhead, eval_async_s=borrowed.eval_async_s,
                              exchange_network=network)
        return Efficiency(compute, step_overhead_s=step_overhead, exchange_network=network)

    def residuals(x) -> list[float]:
        eff = efficiency(x)
        r = [math.log(e.predicted_minutes(eff) / e.row.score_minutes) for e in entries]
        if own_log:
            p = bench.timing_entry.prediction
            r.append(math.log(max(eval_seconds(p.cost, p.plan, p.accelerator, eff), 1e-6) / bench.timing.stopping_s))
        # entries of nearly one size tell a step's fixed cost from its per-sample cost only weakly:
        # a weak pull to none, so the fixed cost is what entries of different batches per
        # accelerator need
        r.append(STEP_OVERHEAD_PRIOR * x[1] / MAX_STEP_OVERHEAD_S)
        return r

    # (where the fixed cost is held at none, x[1] moves nothing but its pull, which keeps it at 0)
    x0, lower, upper = [START_EFFICIENCY, 0.0], [1e-3, 0.0], [MAX_EFFICIENCY, MAX_STEP_OVERHEAD_S]
    if own_log:
        x0 += [START_EFFICIENCY, bench.timing.stopping_s / 2]
        lower += [1e-6, 0.0]
        upper += [MAX_EFFICIENCY, bench.timing.stopping_s]
    if exchange:
        x0, lower, upper = x0 + [LINK_EFFICIENCY], lower + [MIN_EXCHANGE_NETWORK], upper + [1.0]
    solution = least_squares(residuals, x0, bounds=(lower, upper), x_scale="jac")
    return GroupFit(efficiency(solution.x), tuple(e.row.key for e in entries), source, step_fixed)


@dataclass(frozen=True)
class SuiteCheck:
    benchmark: str
    entry: Entry
    fit: GroupFit
    predicted_min: float

    @property
    def measured_min(self) -> float:
        return self.entry.row.score_minutes

    @property
    def error(self) -> float:
        return self.predicted_min / self.measured_min - 1


def leave_one_out(bench: Benchmark) -> list[SuiteCheck]:
    """Each entry of an accelerator with at least two entries, from a fit on the others."""
    rows = []
    for accelerator_id, entries in sorted(bench.groups.items()):
        if len(entries) < 2:
            continue
        for entry in entries:
            f = fit_group(bench, accelerator_id, exclude={entry.row.key})
            rows.append(SuiteCheck(bench.key, entry, f, entry.predicted_minutes(f.efficiency)))
    return rows


def extrapolation(bench: Benchmark, gap: int = 4) -> list[SuiteCheck]:
    """Per accelerator, the entries at least `gap` times larger than every entry fitted on: a fit
    on the entries of at most 1/gap of the largest count predicts those of `gap` times the largest
    fitted count or more (entries in between are neither fitted on nor predicted)."""
    rows = []
    for accelerator_id, entries in sorted(bench.groups.items()):
        largest = max(e.row.count for e in entries)
        fitted_counts = [e.row.count for e in entries if e.row.count * gap <= largest]
        if not fitted_counts:
            continue
        limit = max(fitted_counts)
        f = fit_group(bench, accelerator_id, exclude={e.row.key for e in entries if e.row.count > limit})
        rows.extend(SuiteCheck(bench.key, e, f, e.predicted_minutes(f.efficiency))
                    for e in entries if e.row.count >= gap * limit)
    return rows


def fitted(bench: Benchmark) -> dict[str, GroupFit]:
    return {accelerator_id: fit_group(bench, accelerator_id) for accelerator_id in sorted(bench.groups)}


def fit_for(bench: Benchmark, accelerator: Accelerator) -> tuple[str, GroupFit] | None:
    """The fit of the accelerator's own entries, else of the one it is `like` (an H200 runs an
    H100's software), as (whose entries, fit); None where neither has a published result."""
    for candidate in (accelerator.id, accelerator.like):
        if candidate in bench.groups:
            return candidate, fit_group(bench, candidate)
    return None


class PublishedScoresSource:
    """The calibration source of the benchmarks result_files does not cover (no --stack, no
    --efficiency): the fit of the accelerator's published scores, or of those of the one it
    is `like`. Loads the scores of the asked benchmark when first asked; without the scores beside
    the repository, or without an entry of the benchmark on either accelerator, it does not apply."""

    def __init__(self, catalogue: dict[str, Accelerator], mlperf_folder: Callable[[], Path]) -> None:
        self.catalogue = catalogue
        self.mlperf_folder = mlperf_folder
        self._benchmarks: dict[str, Benchmark | None] = {}

    def benchmark(self, key: str) -> Benchmark | None:
        if key not in self._benchmarks:
            try:
                data = load_suite(suite_dir(), self.catalogue, self.mlperf_folder, only=key)
            except DataError:
                data = None  # no published scores beside the repository: result_files stands in
            self._benchmarks[key] = None if data is None else data.benchmarks.get(key)
        return self._benchmarks[key]

    def calibrate(self, request: Request) -> Calibrated | None:
        key = request.cost.benchmark
        if request.stack is not None or request.efficiency is not None or key == table_benchmark():
            return None
        bench = self.benchmark(key)
        found = fit_for(bench, request.accelerator) if bench is not None else None
        if found is None:
            return None
        whose, group = found
        borrowed = "" if whose == request.accelerator.id else f", borrowed from {whose}"
        return Calibrated(group.efficiency, template(request.accelerator),
                          f"published {key} scores of {len(group.fitted_on)} {whose} "
                          f"entr{'y' if len(group.fitted_on) == 1 else 'ies'}{borrowed}"
                          + (OVERCOUNT_NOTE if group.efficiency.compute > 1 else ""))
