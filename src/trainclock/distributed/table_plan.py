"""Where each embedding table lives on a data-parallel group: the planner of sharded embeddings.
Numbers only (no torch), so the planner's cost models and the memory check use the same plan the
run builds (distributed/embeddings.py).

Three placements, as torchrec's planner and NVIDIA's hybrid embeddings have them:
- replicated: every rank holds the whole table and looks up its own samples; its dense gradient
  is all-reduced with the MLPs' (DDP). For tables of no more rows than a rank's batch: the
  all-reduce then moves no more than the exchange of pooled rows would.
- table: the whole table on one rank, which pools every rank's ids for it (all-to-all).
- row: the table's rows split over every rank (torch.chunk's split); each rank pools the ids
  that fall in its rows and the partial sums are reduce-scattered.

"auto" balances the rows (so the bytes: every table has the same width and type) that ranks
hold: tables larger than a rank's even share of the sharded rows are split row-wise (no whole
placement could keep their holder at the average), the rest dealt whole, largest first, to the
rank holding the fewest rows so far; while the fullest rank then holds more than BALANCE times
the mean (5 tables of 40M rows dealt to 4 ranks), the largest whole table is split row-wise too.
Whole tables are kept where balance allows: a row-wise table costs every rank an all-gather of
its ids and a reduce-scatter of partial sums, a whole one an all-to-all of each rank's own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LAYOUTS = ("auto", "table", "row")
PLACEMENTS = ("replicated", "table", "row")
BALANCE = 1.2  # the most rows the fullest rank of an "auto" plan holds, over the mean


@dataclass(frozen=True)
class TablePlan:
    rows: tuple[int, ...]  # each table's rows
    placement: tuple[str, ...]  # each table's placement (PLACEMENTS)
    owner: tuple[int, ...]  # the rank holding a table-wise table (-1 for the others)
    ranks: int

    def tables(self, placement: str) -> list[int]:
        return [t for t, p in enumerate(self.placement) if p == placement]

    def row_range(self, t: int, rank: int) -> tuple[int, int]:
        """[first, last) rows of row-wise table t on `rank`: torch.chunk's split, as DTensor Shard(0)."""
        chunk = -(-self.rows[t] // self.ranks)
        return min(rank * chunk, self.rows[t]), min((rank + 1) * chunk, self.rows[t])

    def rows_on(self, rank: int) -> int:
        """Table rows `rank` holds, all placements together."""
        held = 0
        for t, p in enumerate(self.placement):
            if p == "replicated" or (p == "table" and self.owner[t] == rank):
                held += self.rows[t]
            elif p == "row":
                first, last = self.row_range(t, rank)
                held += last - first
        return held

    def fullest(self) -> int:
        """The most table rows any rank holds."""
        return max(self.rows_on(r) for r in range(self.ranks))

    def mean(self) -> float:
        return sum(self.rows_on(r) for r in range(self.ranks)) / self.ranks

    def describe(self) -> str:
        counts = {p: len(self.tables(p)) for p in PLACEMENTS if self.tables(p)}
        return ", ".join(f"{n} {p}" for p, n in counts.items())


def assign_tables(rows: Sequence[int], ranks: int, start: Sequence[int] | None = None) -> list[int]:
    """The owner of each table: largest first to the rank holding the fewest rows so far (`start`:
    what each already holds; ties to the lowest rank), so every rank computes the same answer."""
    load = list(start) if start is not None else [0] * ranks
    owner = [0] * len(rows)
    for t in sorted(range(len(rows)), key=lambda t: (-rows[t], t)):
        rank = min(range(ranks), key=lambda r: (load[r], r))
        owner[t] = rank
        load[rank] += rows[t]
    return owner


def plan_tables(layout: str, rows: Sequence[int], ranks: int, local_batch: int) -> TablePlan:
    """The plan of `layout` ("auto", "table" or "row") for tables of `rows` over `ranks` ranks of
    `local_batch` samples each."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown embedding layout {layout!r}; choose one of: {', '.join(LAYOUTS)}")
    if ranks < 1 or local_batch < 1:
        raise ValueError(f"a plan needs at least 1 rank and 1 sample per rank, got {ranks} and {local_batch}")
    rows = tuple(rows)
    if layout != "auto":
        return _placed(rows, [layout] * len(rows), ranks)
    placement = ["replicated" if n <= local_batch else "table" for n in rows]
    sharded = [n for n, p in zip(rows, placement) if p != "replicated"]
    share = sum(sharded) / ranks
    placement = ["row" if p == "table" and n > share else p for n, p in zip(rows, placement)]
    plan = _placed(rows, placement, ranks)
    while plan.fullest() > BALANCE * plan.mean() and plan.tables("table"):
        largest = max(plan.tables("table"), key=lambda t: (rows[t], -t))
        placement[largest] = "row"
        plan = _placed(rows, placement, ranks)
    return plan


def _placed(rows: tuple[int, ...], placement: list[str], ranks: int) -> TablePlan:
    """The plan with its table-wise tables dealt over the ranks, after what each already holds."""
    base = TablePlan(rows, tuple(placement), (-1,) * len(rows), ranks)
    whole = base.tables("table")
    owners = assign_tables([rows[t] for t in whole], ranks, [base.rows_on(r) for r in range(ranks)])
    owner = [-1] * len(rows)
    for t, rank in zip(whole, owners):
        owner[t] = rank
    return TablePlan(rows, tuple(placement), tuple(owner), ranks)
