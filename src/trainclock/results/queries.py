"""Reading the store: entries by filter or by name, and one entry with everything stored about it."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, case, func, literal, null, or_, select
from sqlalchemy.orm import Session, selectinload

from trainclock.errors import UsageError
from trainclock.review.benchmarks import Metric, metrics_from_json
from trainclock.review.entry import INCOMPLETE
from trainclock.results.models import Entry, Eval, Run, System
from trainclock.results.quality import best_values, eval_values
from trainclock.results.records import CLOUD, ONPREM

CPU = "cpu"  # --accelerator cpu: systems without accelerators


@dataclass(frozen=True)
class EntryFilter:
    benchmark: str | None = None  # exactly, as stored: an MLPerf key, or a trainclock member (<benchmark>-<size>)
    round: str | None = None  # "X.Y" (or "vX.Y")
    accelerator: str | None = None  # part of the accelerator's name, any case ("h100", "gaudi2"), or "cpu"
    availability: str | None = None  # CLOUD or ONPREM


@dataclass(frozen=True)
class EntryRow:
    id: int
    round: str
    org: str
    system: str
    benchmark: str
    mlperf_benchmark: str | None
    division: str
    availability: str | None
    accelerators: int | None
    accelerator_model: str | None
    score_minutes: float | None
    verdict: str
    runs_required: int | None
    runs: int
    passed_runs: int
    progress_unit: str | None = None  # what its runs count progress in
    metrics: list[dict] | None = None  # its quality metrics as stored (Metric.as_json rows)
    # the score the official summarizer prints; differs from score_minutes where trainclock withholds one
    summarizer_minutes: float | None = None

    @property
    def quality(self) -> tuple[Metric, ...]:
        return metrics_from_json(self.metrics)


@dataclass(frozen=True)
class RunStats:
    """What a comparison needs of a run."""

    entry_id: int
    passed: bool
    time_to_train_ms: float | None
    progress_unit: str | None
    units_to_converge: float | None  # in progress_unit
    samples_to_converge: float | None


def list_entries(session: Session, where: EntryFilter = EntryFilter()) -> list[EntryRow]:
    return [EntryRow(*row) for row in session.execute(_filtered(_entry_rows(), where))]


def select_entries(session: Session, selectors: list[str], where: EntryFilter = EntryFilter()) -> list[EntryRow]:
    """The entries each selector names, in the order given, each once: an entry id (12 or #12),
    else a part of the org's or system's name, any case. A selector naming nothing is an error."""
    chosen: dict[int, EntryRow] = {}
    for selector in selectors:
        stmt = _filtered(_entry_rows(), where)
        entry_id = selector.removeprefix("#")
        if entry_id.isdigit():
            stmt = stmt.where(Entry.id == int(entry_id))
        else:
            stmt = stmt.where(or_(func.lower(Entry.org).contains(selector.lower(), autoescape=True),
                                  func.lower(Entry.system).contains(selector.lower(), autoescape=True)))
        rows = [EntryRow(*row) for row in session.execute(stmt)]
        if not rows:
            raise UsageError(f"no stored entry matches {selector!r}{_filter_text(where)}; "
                             "`trainclock results list` shows the entries and their ids")
        chosen.update((row.id, row) for row in rows if row.id not in chosen)
    return list(chosen.values())


def load_entry(session: Session, selector: str) -> Entry:
    """One entry with its system, runs, evaluations and findings loaded."""
    (row, *others) = select_entries(session, [selector])
    if others:
        ids = ", ".join(f"#{r.id} {r.org}/{r.system}/{r.benchmark} v{r.round}" for r in [row, *others][:6])
        raise UsageError(f"{selector!r} matches {len(others) + 1} entries ({ids}); give one id")
    return session.scalars(select(Entry).where(Entry.id == row.id).options(
        selectinload(Entry.system_row),
        selectinload(Entry.runs).selectinload(Run.evals),
        selectinload(Entry.runs).selectinload(Run.findings))).one()


def run_stats(session: Session, entry_ids: list[int]) -> dict[int, list[RunStats]]:
    stats: dict[int, list[RunStats]] = {entry_id: [] for entry_id in entry_ids}
    stmt = select(Run.entry_id, Run.passed, Run.time_to_train_ms, Run.progress_unit, Run.units_to_converge,
                  Run.samples_to_converge).where(Run.entry_id.in_(entry_ids)).order_by(Run.entry_id, Run.run_index)
    for row in session.execute(stmt):
        stats[row.entry_id].append(RunStats(*row))
    return stats


def best_quality(session: Session, entry_ids: list[int]) -> dict[int, dict[str, float]]:
    """Per entry, the best value each of its quality metrics reached in a run that passed review,
    in the metric's direction."""
    points: dict[int, list[dict[str, float]]] = {entry_id: [] for entry_id in entry_ids}
    metrics: dict[int, tuple[Metric, ...]] = {}
    stmt = (select(Run.entry_id, Run.metrics, Eval.value, Eval.value_json, Eval.metric)
            .join(Eval, Eval.run_id == Run.id).where(Run.entry_id.in_(entry_ids), Run.passed))
    for row in session.execute(stmt):
        run_metrics = metrics.setdefault(row.entry_id, metrics_from_json(row.metrics))
        points[row.entry_id].append(eval_values(row.value, row.value_json, row.metric, run_metrics))
    return {entry_id: best_values(found, metrics.get(entry_id, ())) for entry_id, found in points.items()}


def _entry_rows() -> Select:
    runs = (select(Run.entry_id, func.count().label("runs"),
                   func.sum(case((Run.passed, 1), else_=0)).label("passed"))
            .group_by(Run.entry_id).subquery())
    # an entry without stored runs (left by an older trainclock) has nothing to back a score or a
    # verdict: it is listed as incomplete and unscored, whatever its row says
    has_runs = func.coalesce(runs.c.runs, 0) > 0
    score = case((has_runs, Entry.score_minutes), else_=null())
    verdict = case((has_runs, Entry.verdict), else_=literal(INCOMPLETE))
    summarizer = case((has_runs, Entry.summarizer_minutes), else_=null())
    return (select(Entry.id, Entry.round, Entry.org, Entry.system, Entry.benchmark, Entry.mlperf_benchmark,
                   Entry.division, Entry.availability, System.accelerators, System.accelerator_model,
                   score, verdict, Entry.runs_required,
                   func.coalesce(runs.c.runs, 0), func.coalesce(runs.c.passed, 0), Entry.progress_unit, Entry.metrics,
                   summarizer)
            .outerjoin(System, Entry.system_id == System.id)
            .outerjoin(runs, runs.c.entry_id == Entry.id)
            # scored entries fastest first, then the rest
            .order_by(Entry.benchmark, Entry.round, score.is_(None), score, Entry.org, Entry.system, Entry.id))


def _filtered(stmt: Select, where: EntryFilter) -> Select:
    if where.benchmark:
        stmt = stmt.where(Entry.benchmark == where.benchmark)
    if where.round:
        stmt = stmt.where(Entry.round == where.round.removeprefix("v"))
    if where.accelerator and where.accelerator.lower() == CPU:
        stmt = stmt.where(System.accelerators == 0)
    elif where.accelerator:
        stmt = stmt.where(func.lower(System.accelerator_model).contains(where.accelerator.lower(), autoescape=True))
    if where.availability:
        if where.availability not in (CLOUD, ONPREM):
            raise ValueError(f"availability must be {CLOUD!r} or {ONPREM!r}")
        stmt = stmt.where(Entry.availability == where.availability)
    return stmt


def _filter_text(where: EntryFilter) -> str:
    given = [f"{name}={value}" for name, value in vars(where).items() if value]
    return f" with {', '.join(given)}" if given else ""


@dataclass(frozen=True)
class FinishedRun:
    """A run that met its target, with what says how it was run (its header) and timed (its
    evaluations' spans), for calibrating a performance model on it."""

    file_name: str
    header: dict
    time_to_train_ms: float
    samples_to_converge: float | None
    global_batch_size: int | None
    eval_spans: list | None


def finished_runs(session: Session) -> list[FinishedRun]:
    rows = session.execute(
        select(Run.file_name, Run.header, Run.time_to_train_ms, Run.samples_to_converge, Run.global_batch_size,
               Run.eval_spans)
        .where(Run.status == "success", Run.time_to_train_ms.is_not(None))
        .order_by(Run.id)).all()
    return [FinishedRun(*row) for row in rows]
