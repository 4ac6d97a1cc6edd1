"""Layouts and batch sizes as the published submissions ran them (planner/model/published_layouts.toml,
read from NVIDIA's public configuration files, and from other submitters' where NVIDIA ran no such
scale), and figures others published for a system, which
`plan` prints beside its prediction as a sanity line and never fits on."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from trainclock.errors import DataError, UsageError
from trainclock.planner.model.parallel_plan import parse_layout

DATA_FILE = "planner/model/published_layouts.toml"


@dataclass(frozen=True)
class PublishedLayout:
    benchmark: str  # MLPerf key
    accelerator: str  # catalogue id
    count: int
    global_batch_size: int
    layout: dict[str, object]  # the fields its --layout string sets
    source: str  # the configuration file, in `repository` at `commit`
    repository: str
    commit: str

    def describe_source(self) -> str:
        return f"{self.repository}@{self.commit[:10]}:{self.source}"


@dataclass(frozen=True)
class ReferenceFigure:
    benchmark: str
    accelerator: str
    count: int
    minutes: float
    compare_count: int | None  # the smaller system of the scaling claim the figure belongs to
    source: str


def parse_table(text: str) -> tuple[tuple[PublishedLayout, ...], tuple[ReferenceFigure, ...]]:
    """The layouts and reference figures of a published_layouts.toml text; DataError where one is
    incomplete or malformed, or where two layouts claim one benchmark, accelerator and count (the
    planner would take whichever came first)."""
    try:
        table = tomllib.loads(text)
        repository, commit = table["repository"], table["commit"]
        layouts = tuple(PublishedLayout(r["benchmark"], r["accelerator"], int(r["count"]), int(r["global_batch_size"]),
                                        parse_layout(r["layout"]), r["source"], repository, commit)
                        for r in table.get("layouts", []))
        figures = tuple(ReferenceFigure(r["benchmark"], r["accelerator"], int(r["count"]), float(r["minutes"]),
                                        r.get("compare_count"), r["source"]) for r in table.get("reference_figures", []))
    except (KeyError, ValueError, TypeError, tomllib.TOMLDecodeError, UsageError) as e:
        raise DataError(f"{DATA_FILE} is incomplete or malformed ({type(e).__name__}: {e}); every layout needs "
                        "benchmark, accelerator, count, global_batch_size, layout and source") from None
    seen: dict[tuple[str, str, int], str] = {}
    for p in layouts:
        key = (p.benchmark, p.accelerator, p.count)
        if key in seen:
            raise DataError(f"{DATA_FILE}: two layouts of {p.benchmark} on {p.count} x {p.accelerator} ({seen[key]} "
                            f"and {p.source}); keep one, and name the files that agree with it in a comment")
        seen[key] = p.source
    return layouts, figures


@cache
def _read() -> tuple[tuple[PublishedLayout, ...], tuple[ReferenceFigure, ...]]:
    return parse_table((resources.files("trainclock.planner.model") / "published_layouts.toml").read_text())


def published_layout(benchmark: str, accelerator_id: str, count: int) -> PublishedLayout | None:
    """How the submission of `benchmark` on `count` x `accelerator_id` ran, where a file says."""
    return next((p for p in _read()[0] if (p.benchmark, p.accelerator, p.count) == (benchmark, accelerator_id, count)),
                None)


def published_layouts(benchmark: str, accelerator_id: str) -> list[PublishedLayout]:
    return sorted((p for p in _read()[0] if (p.benchmark, p.accelerator) == (benchmark, accelerator_id)),
                  key=lambda p: p.count)


def reference_figure(benchmark: str, accelerator_id: str, count: int) -> ReferenceFigure | None:
    return next((f for f in _read()[1] if (f.benchmark, f.accelerator, f.count) == (benchmark, accelerator_id, count)),
                None)
