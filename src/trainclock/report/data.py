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
from trainclock.results.queries import EntryFilter, EntryRow, RunStats, list_entries, run_stats


@dataclass(frozen=True)
class Board:
    """One leaderboard: the entries of one benchmark in one round, fastest first."""

    benchmark: str
    round: str
    rows: list[EntryRow]


@dataclass
class StoreView:
    where: EntryFilter
    rows: list[EntryRow]
    entries: dict[int, Entry]  # by id, with system_row and runs loaded
    runs: dict[int, list[RunStats]]
    comparisons: list[Comparison]

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
    return StoreView(where, rows, entries, runs, compare(rows, runs))
