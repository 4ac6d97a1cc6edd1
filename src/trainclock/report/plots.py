"""The report's plots, drawn with matplotlib's Agg canvas (no display and no pyplot
global state). Each function returns a Figure, or None
when the data holds nothing to draw; save_figure writes it as PNG and SVG."""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, LogFormatter

from trainclock.report.curves import RunCurve
from trainclock.report.planner_curve import PlannerCurve
from trainclock.results.queries import EntryRow, RunStats
from trainclock.storage import atomic_writer

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.5, 100  # 800 x 450 pixels
PLOT_SIZE_PX = (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))  # every plot's, but a run spread of many entries
SPREAD_ROW_IN, SPREAD_MARGIN_IN = 0.16, 1.2  # a run spread's height per entry, and for its title and axis
LEGEND_MAX_FAMILIES = 8  # a scaling plot names its families (two legend lines each) up to this many
SPREAD_MAX_ENTRIES = 150  # a run spread of more would be a picture too tall to read (24 inches)


def png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def png_data_uri(figure: Figure) -> str:
    """For an <img src=...>: a picture inlined this way cannot carry markup into the page."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(figure)).decode("ascii")


def save_figure(figure: Figure, stem: Path) -> list[Path]:
    """<stem>.png and <stem>.svg, each written atomically."""
    written = []
    for suffix, draw in ((".png", png_bytes), (".svg", _svg_bytes)):
        path = stem.with_suffix(suffix)
        with atomic_writer(path, "wb") as f:
            f.write(draw(figure))
        written.append(path)
    return written


@dataclass(frozen=True)
class CurveGroup:
    """Runs drawn together: the same progress unit and quality metrics (one benchmark's runs)."""

    unit: str
    metric_names: tuple[str, ...]
    curves: list[RunCurve]

    @property
    def title(self) -> str:
        first = self.curves[0]
        shown = [(first.metric(name).shown if first.metric(name) else name) for name in self.metric_names]
        return f"{' and '.join(shown) or 'loss'}, progress in {self.unit}"


def curve_groups(curves: Sequence[RunCurve]) -> list[CurveGroup]:
    """The runs by (progress unit, metrics), in the order first met: one plot each, since two
    benchmarks share neither an x axis nor a quality axis."""
    groups: dict[tuple, list[RunCurve]] = {}
    for curve in curves:
        groups.setdefault((curve.unit, tuple(curve.metric_names)), []).append(curve)
    return [CurveGroup(unit, names, members) for (unit, names), members in groups.items()]


def training_curves(curves: Sequence[RunCurve], x_axis: str) -> Figure | None:
    """Training loss and each quality metric (one panel each, labelled with its direction)
    against time (x_axis "time") or progress in the runs' unit ("progress"), with each run's
    target for the metric as a dashed line. The curves should be one CurveGroup."""
    if not any(c.losses or c.evals for c in curves):
        return None
    names = list(dict.fromkeys(name for c in curves for name in c.metric_names))
    figure, (loss_axes, *eval_axes) = _figure(columns=1 + len(names))
    unit = curves[0].unit
    x_of = (lambda p: p.time_s / 60) if x_axis == "time" else (lambda p: p.units)
    x_label = "time since run start (minutes)" if x_axis == "time" else f"{unit} trained"
    for curve in curves:
        line, = loss_axes.plot([x_of(p) for p in curve.losses], [p.value for p in curve.losses],
                               label=_text(curve.label), linewidth=1)
        for name, axes in zip(names, eval_axes):
            points = curve.evals.get(name, [])
            axes.plot([x_of(p) for p in points], [p.value for p in points], marker="o",
                      color=line.get_color(), label=_text(curve.label))
    loss_axes.set(title="training loss", xlabel=x_label, ylabel="loss")
    for name, axes in zip(names, eval_axes):
        metric = next((c.metric(name) for c in curves if c.metric(name)), None)
        for target in sorted({c.metric(name).target for c in curves if c.metric(name) and c.metric(name).target is not None}):
            axes.axhline(target, linestyle="--", color="black", linewidth=1, label=f"target {target:g}")
        shown = _text(metric.shown if metric else name)
        axes.set(title=shown, xlabel=x_label,
                 ylabel=f"{shown} ({metric.direction} is better)" if metric else shown)
    if x_axis != "time":
        for axes in (loss_axes, *eval_axes):
            axes.xaxis.set_major_formatter(EngFormatter(sep=""))  # 200k, 1M: whole numbers overlap on a half-width plot
    (eval_axes or [loss_axes])[-1].legend(fontsize="small")
    return figure


def scaling(rows: Sequence[EntryRow], runs: dict[int, list[RunStats]]) -> Figure | None:
    """Time-to-train against accelerators, log-log, one series per family (benchmark and
    accelerator model), with the ideal-scaling line from the family's smallest system and each
    larger one's time-to-train efficiency written beside it. Entries without an official score
    (too few runs) are drawn hollow at the mean of their passed runs."""
    families = scaling_families(rows, runs)
    if not families:
        return None
    figure, (axes,) = _figure()
    for name, points in families.items():
        sizes = [p.accelerators for p in points]
        line, = axes.plot(sizes, [p.minutes for p in points], label=_text(name))
        for p in points:
            axes.scatter([p.accelerators], [p.minutes], color=line.get_color(), zorder=3,
                         facecolors=line.get_color() if p.scored else "white")
        first = points[0]
        if len(points) > 1:
            axes.plot([first.accelerators, sizes[-1]], [first.minutes, first.minutes * first.accelerators / sizes[-1]],
                      linestyle=":", color=line.get_color(), label=f"ideal from {first.accelerators:,}")
        for p in points[1:]:
            axes.annotate(f"{efficiency(first, p):.0%}", (p.accelerators, p.minutes), textcoords="offset points",
                          xytext=(6, 6), fontsize="small", color=line.get_color())
    axes.set(xscale="log", yscale="log", xlabel="accelerators", ylabel="time-to-train (minutes)",
             title="time-to-train vs accelerators (efficiency vs the family's smallest; hollow: no official score)")
    _plain_log_ticks(axes)
    axes.title.set_fontsize("medium")
    if len(families) <= LEGEND_MAX_FAMILIES:
        axes.legend(fontsize="small")
    else:  # a legend of every family of a whole round would leave no room for the axes
        axes.set_title(f"{axes.get_title()}\n{len(families)} families, too many to name: filter by benchmark "
                       "and round (trainclock serve) to see which is which", fontsize="small")
    return figure


def scaling_efficiency(rows: Sequence[EntryRow], runs: dict[int, list[RunStats]]) -> Figure | None:
    """Time-to-train scaling efficiency against accelerators, for families of two sizes or more."""
    families = {name: points for name, points in scaling_families(rows, runs).items() if len(points) > 1}
    if not families:
        return None
    figure, (axes,) = _figure()
    for name, points in families.items():
        axes.plot([p.accelerators for p in points], [efficiency(points[0], p) * 100 for p in points], marker="o",
                  label=_text(name))
    axes.axhline(100, linestyle="--", color="black", linewidth=1, label="ideal")
    axes.set(xscale="log", title="scaling efficiency vs accelerators", xlabel="accelerators",
             ylabel="time-to-train efficiency (%)")
    _plain_log_ticks(axes)
    axes.legend(fontsize="small")
    return figure


def planner_vs_measured(curve: PlannerCurve, rows: Sequence[EntryRow],
                        runs: dict[int, list[RunStats]]) -> Figure | None:
    """The planner's predicted time-to-train over its sweep, and the stored entries it speaks for."""
    if not curve.points:
        return None
    figure, (axes,) = _figure()
    axes.plot([p.accelerators for p in curve.points], [p.time_to_train_min for p in curve.points], marker="x",
              linestyle="--", color="black", label=_text(f"predicted: {curve.member} on {curve.accelerator}"))
    for row in curve.measured(rows):
        point = measured_point(row, runs)
        if point is not None:
            kind = "" if point.scored else ", no official score: mean of runs"
            axes.scatter([point.accelerators], [point.minutes], zorder=3,
                         label=_text(f"measured: {row.org} {row.system} v{row.round}{kind}"))
    axes.set(xscale="log", yscale="log", title="planner prediction vs measured", xlabel="accelerators",
             ylabel="time-to-train (minutes)")
    _plain_log_ticks(axes)
    axes.legend(fontsize="x-small")
    return figure


def planner_cost(curve: PlannerCurve) -> Figure | None:
    """Predicted cost per run against predicted time-to-train, one point per accelerator count:
    what buying time costs. None when the curve was saved without --price."""
    priced = [p for p in curve.points if p.cost_per_run is not None]
    if not priced:
        return None
    figure, (axes,) = _figure()
    axes.plot([p.time_to_train_min for p in priced], [p.cost_per_run for p in priced], marker="o")
    for p in priced:
        axes.annotate(f"{p.accelerators:,}", (p.time_to_train_min, p.cost_per_run), textcoords="offset points",
                      xytext=(6, 6), fontsize="small")
    axes.set(xscale="log", title=_text(f"predicted cost vs time-to-train: {curve.member} on {curve.accelerator}"),
             xlabel="time-to-train (minutes)", ylabel=_text(f"cost per run (price {curve.price})"))
    _plain_log_ticks(axes)
    return figure


def run_spread(rows: Sequence[EntryRow], runs: dict[int, list[RunStats]]) -> Figure | None:
    """Each entry's runs (dots) around its score (a bar), time on a log axis since benchmarks
    range from seconds to hours."""
    shown = [(row, [r.time_to_train_ms / 60000 for r in runs.get(row.id, []) if r.time_to_train_ms])
             for row in rows]
    shown = [(row, minutes) for row, minutes in shown if minutes]
    if not shown:
        return None
    entries = len(shown)
    shown = shown[:SPREAD_MAX_ENTRIES]
    # one line of small text per entry: a whole round's entries need a taller picture to stay legible
    figure, (axes,) = _figure(height_in=max(HEIGHT_IN, SPREAD_ROW_IN * len(shown) + SPREAD_MARGIN_IN))
    for y, (row, minutes) in enumerate(shown):
        axes.scatter(minutes, [y] * len(minutes), s=14, color="tab:blue", alpha=0.7)
        if row.score_minutes is not None:
            axes.scatter([row.score_minutes], [y], marker="|", s=300, color="tab:red")
    axes.set_yticks(range(len(shown)), [_text(f"{r.benchmark} v{r.round} {r.system}"[:48]) for r, _ in shown],
                    fontsize="x-small")
    title = "runs (dots) around each entry's score (red bar)"
    if entries > len(shown):
        title += f": the first {len(shown)} of {entries} entries, in the leaderboards' order"
    axes.set(xscale="log", title=title, xlabel="time-to-train (minutes)")
    _plain_log_ticks(axes)
    return figure


@dataclass(frozen=True)
class MeasuredPoint:
    accelerators: int
    minutes: float
    scored: bool  # the official score; else the mean of the entry's passed runs


def measured_point(row: EntryRow, runs: dict[int, list[RunStats]]) -> MeasuredPoint | None:
    """The entry's score, else (too few runs for one) the mean time of its runs that passed review."""
    if not row.accelerators:
        return None
    if row.score_minutes and row.score_minutes > 0:
        return MeasuredPoint(row.accelerators, row.score_minutes, True)
    passed = [r.time_to_train_ms / 60000 for r in runs.get(row.id, []) if r.passed and r.time_to_train_ms]
    return MeasuredPoint(row.accelerators, sum(passed) / len(passed), False) if passed else None


def scaling_families(rows: Sequence[EntryRow], runs: dict[int, list[RunStats]]) -> dict[str, list[MeasuredPoint]]:
    """{"<benchmark>: <accelerator model>": points by size}; at each size the fastest entry
    stands for it, a scored one before one without a score."""
    families: dict[str, dict[int, MeasuredPoint]] = defaultdict(dict)
    for row in rows:
        point = measured_point(row, runs) if row.accelerator_model else None
        if point is None:
            continue
        sizes = families[f"{row.benchmark}: {row.accelerator_model}"]
        best = sizes.get(point.accelerators)
        if best is None or (point.scored, -point.minutes) > (best.scored, -best.minutes):
            sizes[point.accelerators] = point
    return {name: [sizes[n] for n in sorted(sizes)] for name, sizes in families.items()}


def efficiency(small: MeasuredPoint, large: MeasuredPoint) -> float:
    """Time-to-train scaling efficiency from the small system to the large: (T(N) / T(kN)) / k."""
    return (small.minutes / large.minutes) / (large.accelerators / small.accelerators)


def _figure(columns: int = 1, height_in: float = HEIGHT_IN) -> tuple[Figure, list]:
    figure = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    axes = figure.subplots(1, columns, squeeze=False)[0]
    for a in axes:
        a.grid(True, which="both", alpha=0.3)
    return figure, list(axes)


def _plain_log_ticks(axes) -> None:
    """Log axes labelled 60 and 4,000 rather than 6 x 10^1 and 4 x 10^3."""
    for axis, scale in ((axes.xaxis, axes.get_xscale()), (axes.yaxis, axes.get_yscale())):
        if scale == "log":
            axis.set_major_formatter(LogFormatter())
            axis.set_minor_formatter(LogFormatter(labelOnlyBase=False))


def _svg_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    FigureCanvasAgg(figure).print_figure(buffer, format="svg")
    return buffer.getvalue()


def _text(label: str) -> str:
    # names come from logs and system files: a "$" would start matplotlib's math mode (and may fail to parse)
    return label.replace("$", r"\$")
