"""The benchmark list as a terminal table: every workload's members with metric, direction and target."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from trainclock.console import table_console
from trainclock.workload.base import Member


def print_members(benchmarks: Sequence[tuple[str, str, Sequence[Member]]], console: Console | None = None) -> None:
    """benchmarks: (MLPerf key, title, members) for each workload."""
    console = table_console(console)
    table = Table(title="benchmarks (`trainclock run MEMBER`; an MLPerf key alone runs the full size)")
    for col in ("benchmark", "member", "parameters", "shape", "quality target", "target from"):
        table.add_column(col, justify="right" if col == "parameters" else "left")
    for key, title, members in benchmarks:
        for member in members:
            table.add_row(f"{key} ({title})", member.name, _count(member.parameters), member.description,
                          "; ".join(t.describe() for t in member.quality), member.target_source.split(":")[0])
    console.print(table)


def _count(n: int) -> str:
    return f"{n / 1e9:,.1f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"
