"""`trainclock report`: one self-contained HTML file (plots inlined as base64 PNG, no network
needed to view it) with the leaderboards, each system, scaling, the planner and trainclock's own
runs; the plots are also written beside it as PNG and SVG.

Templates are rendered with autoescaping on: every name and field read from a log or a system
file is text in the page, never markup. A Content-Security-Policy (in the page, and as a header
where it is served) is the second guard: no script runs and nothing is loaded; the one inline
style block (style.css.j2, inline so that the report stays one file) is allowed by its hash."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, cached_property
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from matplotlib.figure import Figure

from trainclock.errors import UsageError
from trainclock.report import plots
from trainclock.report.curves import RunCurve, find_metrics, read_curve
from trainclock.report.data import StoreView
from trainclock.report.planner_curve import PlannerCurve
from trainclock.storage import atomic_write_text

REPORT_NAME = "trainclock-report.html"


@dataclass
class Picture:
    name: str  # file stem in the output folder
    title: str
    figure: Figure | None
    missing: str  # why there is no figure, shown instead of it

    @cached_property
    def data_uri(self) -> str | None:
        return plots.png_data_uri(self.figure) if self.figure is not None else None


@dataclass
class ReportInputs:
    view: StoreView
    db_url: str
    own_runs: list[RunCurve] = field(default_factory=list)
    planner_curves: list[PlannerCurve] = field(default_factory=list)


def environment() -> Environment:
    # autoescape for every template, whatever its suffix: the safety of the page must not hang on a file name
    return Environment(loader=PackageLoader("trainclock.report", "templates"),
                       autoescape=select_autoescape(default=True, default_for_string=True),
                       trim_blocks=True, lstrip_blocks=True)


@cache
def style() -> str:
    """The CSS of every page, exactly as it goes between <style> and </style>."""
    return environment().get_template("style.css.j2").render()


def content_security_policy(served: bool = False) -> str:
    """What the browser may load or run on the page: only its own style block and data: images;
    the filter form submits to the same server. frame-ancestors works only as a header (served)."""
    digest = base64.b64encode(hashlib.sha256(style().encode("utf-8")).digest()).decode("ascii")
    rules = ["default-src 'none'", f"style-src 'sha256-{digest}'", "img-src data:", "form-action 'self'",
             "base-uri 'none'"]
    if served:
        rules.append("frame-ancestors 'none'")
    return "; ".join(rules)


def own_run_curves(view: StoreView, runs_dir: Path | None) -> list[RunCurve]:
    """trainclock's own runs: those in the store whose metrics file is still beside the log, and
    those under --runs."""
    paths = [Path(run.path).with_name(Path(run.path).stem + ".metrics.jsonl")
             for entry in view.entries.values() for run in entry.runs]
    paths = [p for p in paths if p.is_file()]
    if runs_dir is not None:
        paths += find_metrics(runs_dir)
    unique = {p.resolve(): p for p in paths}
    return [read_curve(p) for p in sorted(unique.values())]


def pictures(inputs: ReportInputs) -> list[Picture]:
    view = inputs.view
    no_scores = "no entry with a known accelerator count and a time-to-train"
    found = [
        Picture("scaling", "Time-to-train vs accelerators", plots.scaling(view.rows, view.runs), no_scores),
        Picture("scaling-efficiency", "Scaling efficiency", plots.scaling_efficiency(view.rows, view.runs),
                "no family (benchmark and accelerator) with two sizes or more"),
        Picture("run-spread", "Runs around each score", plots.run_spread(view.rows, view.runs),
                "no run with a time-to-train"),
    ]
    found += own_run_pictures(inputs.own_runs)
    found += [Picture(f"planner-{i}", f"Planner: {c.member} on {c.accelerator}",
                      plots.planner_vs_measured(c, view.rows, view.runs), f"{c.path} has no points")
              for i, c in enumerate(inputs.planner_curves)]
    found += [Picture(f"planner-cost-{i}", f"Planner cost: {c.member} on {c.accelerator}", plots.planner_cost(c),
                      "the curve was saved without --price")
              for i, c in enumerate(inputs.planner_curves)]
    return found


OWN_RUNS = "own-runs"  # the name prefix of the own-run pictures


def own_run_pictures(curves: Sequence[RunCurve]) -> list[Picture]:
    """Two plots (vs time, vs progress) per group of runs with one progress unit and one set of
    quality metrics: own-runs-<i>-time and own-runs-<i>-progress."""
    groups = plots.curve_groups(curves)
    if not groups:
        no_runs = "no trainclock run with a metrics file: give --runs DIR (the --out of `trainclock run`)"
        return [Picture(f"{OWN_RUNS}-0-time", "Own runs: loss and quality vs time", None, no_runs)]
    return [Picture(f"{OWN_RUNS}-{i}-{axis}", f"Own runs ({group.title}): loss and quality vs {shown}",
                    plots.training_curves(group.curves, axis), "no run of this kind has a loss or an evaluation")
            for i, group in enumerate(groups)
            for axis, shown in (("time", "time"), ("progress", group.unit))]


def render_report(inputs: ReportInputs, shown: Sequence[Picture], template: str = "report.html.j2",
                  generated: str | None = None, **extra: object) -> str:
    """The report's HTML; the web page renders its own template (page.html.j2, with filters) the same way."""
    generated = generated or datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return environment().get_template(template).render(
        view=inputs.view, db_url=inputs.db_url, own_runs=inputs.own_runs, planner_curves=inputs.planner_curves,
        pictures={p.name: p for p in shown}, own_pictures=[p for p in shown if p.name.startswith(OWN_RUNS)],
        generated=generated, style=Markup(style()), content_security_policy=content_security_policy(), **extra)


def write_report(inputs: ReportInputs, out_dir: Path) -> tuple[Path, list[Path]]:
    """The HTML file and the PNG/SVG plots, in out_dir."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file; give a folder for the report and its plots")
    shown = pictures(inputs)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written = [path for p in shown if p.figure is not None for path in plots.save_figure(p.figure, out_dir / p.name)]
        report = out_dir / REPORT_NAME
        atomic_write_text(report, render_report(inputs, shown))
    except OSError as e:
        raise UsageError(f"cannot write the report into {out_dir}: {e.strerror}; choose another --out") from None
    return report, written
