"""What the HTML report and the web page show, read from the store in one transaction: entries
(filtered), their systems and runs, per-benchmark comparisons and the scaling pairs."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from trainclock.results.compare import Comparison, compare
from trainclock.results.db import Store, read
from trainclock.results.models import Entry
from trainclock.results.queries import EntryFilter, EntryRow, RunStats, best_quality, list_entries, run_stats
from trainclock.review.benchmarks import Metric, describe, metrics_from_json


@dataclass(frozen=True)
class Board:
    """One leaderboard: the entries of one benchmark in one round, fastest first."""

    benchmark: str
    round: str
    rows: list[EntryRow]

    @property
    def metrics(self) -> tuple[Metric, ...]:
        """The benchmark's quality metrics, with their direction (from its entries)."""
        return next((row.quality for row in self.rows if row.quality), ())

    @property
    def quality(self) -> str:
        return describe(self.metrics)

    @property
    def progress_unit(self) -> str | None:
        return next((row.progress_unit for row in self.rows if row.progress_unit), None)


@dataclass
class StoreView:
    where: EntryFilter
    rows: list[EntryRow]
    entries: dict[int, Entry]  # by id, with system_row and runs loaded
    runs: dict[int, list[RunStats]]
    comparisons: list[Comparison]
    best: dict[int, dict[str, float]]  # per entry, the best quality its passed runs reached, by metric

    def entry_metrics(self, entry_id: int) -> tuple[Metric, ...]:
        entry = self.entries.get(entry_id)
        return metrics_from_json(entry.metrics) if entry is not None else ()

    @property
    def boards(self) -> list[Board]:
        # list_entries orders by benchmark, then round, then score
        return [Board(benchmark, round_, list(rows))
                for (benchmark, round_), rows in groupby(self.rows, key=lambda r: (r.benchmark, r.round))]


def load_view(store: Store, where: EntryFilter = EntryFilter()) -> StoreView:
    return read(store, lambda session: _load(session, where), "reading the results for the report")


def _load(session: Session, where: EntryFilter) -> StoreView:
    rows = list_entries(session, where)
    ids = [row.id for row in rows]
    entries = {e.id: e for e in session.scalars(
        select(Entry).where(Entry.id.in_(ids)).options(selectinload(Entry.system_row), selectinload(Entry.runs)))}
    runs = run_stats(session, ids)
    best = best_quality(session, ids)
    return StoreView(where, rows, entries, runs, compare(rows, runs, best), best)
