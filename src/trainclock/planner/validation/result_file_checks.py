"""`trainclock plan --validate`: how well the calibrated model reproduces the published results,
and how well it predicts those it was not fitted on (leave-one-out, and extrapolation from
small systems to large ones), plus a projection beyond the published table."""

from __future__ import annotations

from dataclasses import dataclass

from trainclock.planner.calibration import result_files
from trainclock.planner.calibration.mlperf_data import LogTiming
from trainclock.planner.calibration.result_files import CalibrationData, Check, StackFit
from trainclock.planner.model import search
from trainclock.planner.model.parallel_plan import Plan, complete
from trainclock.planner.model.predict import Prediction, predict

GOAL_MEAN_ERROR = 0.03  # mean absolute error on entries left out of the fit, total and training part
GOAL_WORST_ERROR = 0.06
GOAL_PARTS = ("total", "training")
EXTRAPOLATE_FROM = 768  # fit on entries up to this many accelerators, predict the larger ones
# Beyond the table: the largest published system (10,752 H100), at the 3,584-GPU entry's batch.
PROJECTIONS = (("h100-sxm", 10752, 2688),)


@dataclass(frozen=True)
class LogCheck:
    """A stack's result logs against the model, which was fitted to times to train (and to the
    evaluation times), never to the step times."""

    stack: str
    entry: str
    logged_step_s: float
    model_step_s: float
    logged_eval_s: float
    model_eval_s: float
    logged_accumulation: int | None  # gradient_accumulation_steps in the log
    model_micro_batches: int


@dataclass(frozen=True)
class Projection:
    stack: str
    how: str  # which layout
    prediction: Prediction


@dataclass(frozen=True)
class ValidationReport:
    fits: dict[str, StackFit]
    fitted: list[Check]
    logs: list[LogCheck]
    leave_one_out: list[Check]
    extrapolation: list[Check]
    projections: list[Projection]
    unit: str  # the benchmark's progress unit, e.g. tokens

    def goal_rows(self) -> list[tuple[str, str, tuple[float, float] | None]]:
        """(which test, which part, (mean, worst) error) for every part the goal covers."""
        return [(name, part, result_files.error_summary(rows, part))
                for name, rows in (("leave-one-out", self.leave_one_out), ("extrapolation", self.extrapolation))
                for part in GOAL_PARTS]

    @property
    def meets_goal(self) -> bool:
        return all(summary is None or (summary[0] <= GOAL_MEAN_ERROR and summary[1] <= GOAL_WORST_ERROR)
                   for _, _, summary in self.goal_rows())


def validate(data: CalibrationData) -> ValidationReport:
    fits = result_files.fit(data)
    return ValidationReport(
        fits=fits,
        fitted=result_files.check(data, fits, data.entries),
        logs=[_log_check(data, fits[s], t) for s, t in data.timings.items()],
        leave_one_out=result_files.leave_one_out(data),
        extrapolation=result_files.extrapolation(data, EXTRAPOLATE_FROM),
        projections=[p for accelerator, count, gbs in PROJECTIONS for p in _projections(data, fits, accelerator, count, gbs)],
        unit=data.cost.progress_unit,
    )


def _log_check(data: CalibrationData, fit: StackFit, timing: LogTiming) -> LogCheck:
    entry = data.entry(fit.stack.timing_entry)
    run = result_files.entry_prediction(data, entry, fit.efficiency, entry.published.scored_run_units)
    return LogCheck(fit.stack.id, entry.key, timing.mean_step_s, run.step.step_s, timing.mean_eval_s, run.eval_s,
                    timing.gradient_accumulation_steps, run.step.micro_batches)


def _projections(data: CalibrationData, fits: dict[str, StackFit], accelerator: str, count: int, gbs: int) -> list[Projection]:
    own = [f for f in fits.values() if f.stack.accelerator.id == accelerator]
    if not own:
        return []
    fit = max(own, key=lambda f: f.stack.round)
    stack = fit.stack
    as_submitted = complete(Plan(), stack.layout, count)
    found = search.search(data.cost, stack.accelerator, count, fit.efficiency, as_submitted, {}, gbs, data.convergence)
    rows = [Projection(stack.id, "the stack's layout",
                       predict(data.cost, stack.accelerator, gbs, as_submitted, fit.efficiency, data.convergence))]
    if found.ranked:
        rows.append(Projection(stack.id, "best layout found", found.ranked[0]))
    return rows

