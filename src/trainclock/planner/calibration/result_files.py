"""Calibration: fit, per software stack (an accelerator in one MLPerf round), the two numbers the
step-time model cannot know from datasheets, and test them on results left out of the fit.

- compute efficiency: the fraction of peak FLOP/s the matmuls reach, fitted to the official
  time-to-train of the stack's entries in the results table (each timed with the progress its
  scored run actually made, in the benchmark's progress unit);
- evaluation overhead: seconds each evaluation costs beyond its forward passes, fitted to the
  evaluation times in the stack's result logs (eval_stop - eval_start). A stack whose log is
  left out borrows the overhead of the same accelerator's other stack.

Everything else (links, bubble, overlap, optimizer) comes from the catalogue and the layout.
Predictions of left-out entries use the convergence model's progress, as a user's would.

The published table is one benchmark's (submissions.toml names it), planned with
the cost model of that benchmark's full-size member, found through the workload registry."""

from __future__ import annotations

import math
import statistics
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from scipy.optimize import least_squares

from trainclock.errors import DataError, UsageError
from trainclock.planner.calibration import Calibrated, Request
from trainclock.planner.calibration.mlperf_data import (SUBMISSIONS, LogTiming, PublishedEntry, log_timing,
                                                        read_published, submissions, table_benchmark)
from trainclock.planner.model.convergence import ConvergenceModel, load_convergence
from trainclock.planner.model.hardware import Accelerator, by_alias
from trainclock.planner.model.parallel_plan import LAYOUT_FIELDS, Plan, complete, parse_layout
from trainclock.planner.model.predict import Prediction, predict
from trainclock.planner.model.step_time import Efficiency, eval_seconds, step_time
from trainclock.planner.model.workload_view import cost_model
from trainclock.workload.cost_model import WorkloadCost

_BOUNDS = {"compute": (0.01, 1.0), "eval_overhead_s": (0.0, 600.0)}


@dataclass(frozen=True)
class Stack:
    id: str
    accelerator: Accelerator
    round: str
    software: str
    layout: dict[str, object]  # the fields its --layout string sets
    layout_source: str
    timing_entry: str  # key of the entry whose logs time its evaluations
    timing_log: str  # that entry's result folder, relative to the MLPerf data folder


@dataclass(frozen=True)
class Entry:
    """A published result and how it was run."""

    published: PublishedEntry
    stack: Stack
    plan: Plan
    layout_source: str

    @property
    def key(self) -> str:
        return self.published.key


@dataclass(frozen=True)
class CalibrationData:
    cost: WorkloadCost  # of the benchmark the published table is about
    stacks: dict[str, Stack]
    entries: tuple[Entry, ...]
    timings: dict[str, LogTiming]  # by stack id
    convergence: ConvergenceModel

    def entry(self, key: str) -> Entry:
        return next(e for e in self.entries if e.key == key)


@dataclass(frozen=True)
class StackFit:
    stack: Stack
    efficiency: Efficiency
    overhead_source: str
    fitted_on: tuple[str, ...]  # entry keys


@dataclass(frozen=True)
class Check:
    """One entry's measured score against the model's."""

    entry: Entry
    fit: StackFit
    measured_min: float
    predicted_min: float  # progress from the convergence model
    timed_min: float  # with what the scored run trained: the step-time model alone

    parts: "PartCheck | None" = None  # where the entry's own logs are in the data

    @property
    def error(self) -> float:
        return self.predicted_min / self.measured_min - 1

    @property
    def timing_error(self) -> float:
        return self.timed_min / self.measured_min - 1


PARTS = ("training", "evaluations", "rest", "total")


@dataclass(frozen=True)
class PartCheck:
    """A mean run of an entry's logs, part by part (seconds), against the model's run of the same
    progress: steady training, evaluations, and the rest of the timed region."""

    measured: dict[str, float]
    predicted: dict[str, float]

    def error(self, part: str) -> float:
        return self.predicted[part] / self.measured[part] - 1


def load_calibration_data(folder: Path, catalogue: dict[str, Accelerator]) -> CalibrationData:
    benchmark, stacks, overrides = _read_submissions(catalogue)
    cost = cost_model(benchmark)  # the benchmark's full-size member
    entries = []
    for published in read_published(folder):
        stack_id = f"{by_alias(catalogue, published.accelerator_model).id}/v{published.round}"
        if stack_id not in stacks:
            raise DataError(f"{published.key}: no stack {stack_id!r} in {SUBMISSIONS}; describe how it ran")
        stack = stacks[stack_id]
        override, source = overrides.get(published.key, ({}, stack.layout_source))
        plan = complete(Plan(), {**stack.layout, **override}, published.accelerators)
        entries.append(Entry(published, stack, plan, source))
    timings = {s.id: log_timing(folder / s.timing_log, cost.units_per_sample) for s in stacks.values()
               if any(e.key == s.timing_entry for e in entries)}
    return CalibrationData(cost, stacks, tuple(entries), timings, load_convergence(cost, lambda: folder))


def _read_submissions(catalogue: dict[str, Accelerator]) -> tuple[str, dict[str, Stack], dict[str, tuple[dict, str]]]:
    path = SUBMISSIONS
    try:
        table = submissions()
        benchmark = table["benchmark"]
        stacks = {sid: Stack(sid, catalogue[s["accelerator"]], s["round"], s["software"], parse_layout(s["layout"]),
                             s["layout_source"], s["timing_entry"], s["timing_log"])
                  for sid, s in table["stacks"].items()}
        overrides = {key: (parse_layout(e.get("layout", "")), e["source"]) for key, e in table.get("entries", {}).items()}
    except (KeyError, tomllib.TOMLDecodeError, UsageError) as e:
        raise DataError(f"{path} is incomplete or malformed ({e}); it names the benchmark and every stack needs "
                        f"accelerator, round, software, layout, layout_source, timing_entry and timing_log") from None
    return benchmark, stacks, overrides


def entry_prediction(data: CalibrationData, entry: Entry, efficiency: Efficiency, units: float | None = None) -> Prediction:
    """The model's run of a published entry: with `units` trained (of the benchmark's progress
    unit), else the convergence model's."""
    p = entry.published
    return predict(data.cost, entry.stack.accelerator, p.global_batch_size, entry.plan, efficiency,
                   convergence=data.convergence, units=units)


def modelled_eval_s(data: CalibrationData, entry: Entry, efficiency: Efficiency) -> float:
    return eval_seconds(data.cost, entry.plan, entry.stack.accelerator, efficiency)


def fit(data: CalibrationData, keys: Iterable[str] | None = None) -> dict[str, StackFit]:
    """Fit every stack that has entries among `keys` (default: all entries): its matmul efficiency
    to the entries' times to train and to its log's steady step time, its evaluation overhead to
    the log's evaluations; its run overhead is what the log's timed region holds beyond both. A
    log counts only when its entry is among `keys` (the others are what the fit is tested on)."""
    wanted = None if keys is None else set(keys)
    chosen = [e for e in data.entries if wanted is None or e.key in wanted]
    if not chosen:
        raise ValueError("nothing to fit")
    chosen_keys = {e.key for e in chosen}
    stack_ids = sorted({e.stack.id for e in chosen})
    own_log = [s for s in stack_ids if s in data.timings and data.stacks[s].timing_entry in chosen_keys]
    lender = {s: s if s in own_log else _lender(data.stacks[s], [data.stacks[o] for o in own_log]) for s in stack_ids}
    run_overhead = {s: max(0.0, data.timings[s].mean_remainder_s) for s in own_log}

    def efficiencies(x) -> dict[str, Efficiency]:
        overhead = dict(zip(own_log, x[len(stack_ids):]))
        return {s: Efficiency(float(x[i]), float(overhead.get(lender[s], 0.0)), run_overhead.get(lender[s], 0.0))
                for i, s in enumerate(stack_ids)}

    def residuals(x) -> list[float]:
        eff = efficiencies(x)
        r = [math.log(entry_prediction(data, e, eff[e.stack.id], e.published.scored_run_units).time_to_train_s / 60
                      / e.published.score_minutes) for e in chosen]
        for s in own_log:
            timing, entry = data.timings[s], data.entry(data.stacks[s].timing_entry)
            r.append(math.log(modelled_eval_s(data, entry, eff[s]) / timing.mean_eval_s))
            r.append(math.log(step_time(data.cost, timing.global_batch_size, entry.plan, entry.stack.accelerator,
                                        eff[s]).step_s / timing.mean_step_s))
        return r

    n_own = len(own_log)
    lower = [_BOUNDS["compute"][0]] * len(stack_ids) + [_BOUNDS["eval_overhead_s"][0]] * n_own
    upper = [_BOUNDS["compute"][1]] * len(stack_ids) + [_BOUNDS["eval_overhead_s"][1]] * n_own
    solution = least_squares(residuals, [0.5] * len(stack_ids) + [1.0] * n_own, bounds=(lower, upper), x_scale="jac")
    eff = efficiencies(solution.x)
    return {s: StackFit(data.stacks[s], eff[s], _overhead_source(s, lender[s]),
                        tuple(e.key for e in chosen if e.stack.id == s)) for s in stack_ids}


def _lender(stack: Stack, with_logs: list[Stack]) -> str | None:
    """The stack whose evaluation overhead a stack without its own log borrows: the same
    accelerator's latest round."""
    same = [s for s in with_logs if s.accelerator.id == stack.accelerator.id]
    return max(same, key=lambda s: s.round).id if same else None


def _overhead_source(stack_id: str, lender: str | None) -> str:
    if lender == stack_id:
        return "fitted to its evaluation log"
    return f"borrowed from {lender}'s log" if lender else "no evaluation log: 0 s"


def check(data: CalibrationData, fits: dict[str, StackFit], entries: Iterable[Entry]) -> list[Check]:
    rows = []
    for e in entries:
        f = fits[e.stack.id]
        rows.append(Check(e, f, e.published.score_minutes,
                          entry_prediction(data, e, f.efficiency).time_to_train_s / 60,
                          entry_prediction(data, e, f.efficiency, e.published.scored_run_units).time_to_train_s / 60,
                          _parts(data, e, f.efficiency)))
    return rows


def _parts(data: CalibrationData, entry: Entry, efficiency: Efficiency) -> PartCheck | None:
    timing = data.timings.get(entry.stack.id)
    if timing is None or entry.stack.timing_entry != entry.key:
        return None
    run = entry_prediction(data, entry, efficiency, timing.mean_units)
    return PartCheck(
        measured=dict(zip(PARTS, (timing.mean_train_s, timing.mean_evals_s, timing.mean_remainder_s, timing.mean_run_s))),
        predicted=dict(zip(PARTS, (run.train_s, run.evals_s, run.run_overhead_s, run.time_to_train_s))))


def leave_one_out(data: CalibrationData) -> list[Check]:
    """Each entry predicted by a fit on all the others."""
    rows = []
    for e in data.entries:
        rest = [o.key for o in data.entries if o.key != e.key]
        if not any(data.entry(k).stack.id == e.stack.id for k in rest):
            continue  # the only entry of its stack: nothing left to fit it with
        rows.extend(check(data, fit(data, rest), [e]))
    return rows


def extrapolation(data: CalibrationData, max_fitted: int) -> list[Check]:
    """Entries larger than `max_fitted` accelerators, predicted by a fit on the rest."""
    small = [e.key for e in data.entries if e.published.accelerators <= max_fitted]
    fits = fit(data, small)
    return check(data, fits, [e for e in data.entries if e.published.accelerators > max_fitted and e.stack.id in fits])


def error_summary(rows: list[Check], part: str = "total") -> tuple[float, float] | None:
    """(mean absolute error, worst absolute error), as fractions, of the end-to-end predictions
    (part "total": against the official scores) or of one part of the runs in the entries' logs;
    None when no row has that part."""
    if part == "total":
        errors = [abs(r.error) for r in rows]
    else:
        errors = [abs(r.parts.error(part)) for r in rows if r.parts is not None]
    return (statistics.fmean(errors), max(errors)) if errors else None


class ResultFilesSource:
    """The calibration source of last resort: the software stacks of the published results table
    (submissions.toml), by --stack, else the accelerator's latest stack, or that of the
    accelerator it is `like`; a UsageError where none is. Loads the table when first asked."""

    def __init__(self, catalogue: dict[str, Accelerator], mlperf_folder: Callable[[], Path]) -> None:
        self.catalogue = catalogue
        self.mlperf_folder = mlperf_folder

    @cached_property
    def fits(self) -> dict[str, StackFit]:
        return fit(load_calibration_data(self.mlperf_folder(), self.catalogue))

    def calibrate(self, request: Request) -> Calibrated:
        accelerator, efficiency = request.accelerator, request.efficiency
        stack_fit = self.stack_fit(accelerator, request.stack)
        # the stack's habits, not its shape: tp, pp, dp and vp come from --layout or the search
        template = replace(Plan(), **{k: v for k, v in stack_fit.stack.layout.items() if k not in LAYOUT_FIELDS})
        if efficiency is not None:
            return Calibrated(Efficiency(efficiency, stack_fit.efficiency.eval_overhead_s), template,
                              f"given (--efficiency), evaluation overhead of {stack_fit.stack.id}")
        stack = stack_fit.stack
        borrowed = "" if stack.accelerator.id == accelerator.id else f", borrowed from {stack.accelerator.id}"
        benchmark = request.cost.benchmark
        if request.stack is None and benchmark != table_benchmark():
            # no published result of this benchmark on this accelerator: the table's stack stands in
            borrowed += f"; no published {benchmark} result on {accelerator.id}"
        return Calibrated(stack_fit.efficiency, template, f"{stack.id} ({stack.software}){borrowed}")

    def stack_fit(self, accelerator: Accelerator, stack: str | None) -> StackFit:
        fits = self.fits
        if stack is not None:
            if stack not in fits:
                raise UsageError(f"unknown --stack {stack!r}; calibrated stacks: {', '.join(sorted(fits))}")
            return fits[stack]
        for candidate in (accelerator.id, accelerator.like):
            own = [f for f in fits.values() if f.stack.accelerator.id == candidate]
            if own:
                return max(own, key=lambda f: f.stack.round)
        raise UsageError(f"{accelerator.id} has no calibration (no published result in the calibration data): give "
                         f"--efficiency F (the fraction of peak FLOP/s its matmuls reach, e.g. 0.4) or borrow one "
                         f"with --stack, one of: {', '.join(sorted(fits))}")
