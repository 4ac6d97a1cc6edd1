"""trainclock's own runs as curves: per-step loss and the evaluations from
result_<i>.metrics.jsonl, the progress unit and the quality metrics with their targets from the
MLPerf log beside it (trainclock_progress_unit, trainclock_target; review.run_review reads them).

Both forms of the metrics file are read:
  first form  {"step", "samples", "tokens", "time_s", "loss", ...} and {..., "tokens", "eval": 4.9}
  now         {"step", "samples", "units", "time_s", "loss", ...} and {..., "units", "eval": {"name": 0.38}}
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from trainclock.errors import DataError
from trainclock.mllog.reader import read_events
from trainclock.review.benchmarks import Metric
from trainclock.review.run_review import log_quality

FIRST_FORM_UNIT = "tokens"  # what the first form's progress field counts, and names
DEFAULT_METRIC = "quality"  # a number-valued eval of a run whose log names no metric


@dataclass(frozen=True)
class Point:
    time_s: float
    units: float  # progress, in the curve's unit
    value: float


@dataclass
class RunCurve:
    label: str  # <system>/<workload>/result_<i>
    log_path: Path
    unit: str  # what `units` counts: "tokens", "samples", "images", ...
    metrics: tuple[Metric, ...]  # the quality metrics, with direction and (where the log says) target
    losses: list[Point] = field(default_factory=list)
    evals: dict[str, list[Point]] = field(default_factory=dict)  # by metric name, in step order

    @property
    def metric_names(self) -> list[str]:
        """The log's metrics, then any other an evaluation names (shown, with no direction to rank by)."""
        names = [m.name for m in self.metrics]
        return names + [name for name in self.evals if name not in names]

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    @property
    def target(self) -> float | None:
        """The first metric's target (most benchmarks have one metric)."""
        return self.metrics[0].target if self.metrics else None

    @property
    def best(self) -> dict[str, float]:
        """The best value of each metric, in its direction."""
        found = {}
        for metric in self.metrics:
            value = metric.best([p.value for p in self.evals.get(metric.name, [])])
            if value is not None:
                found[metric.name] = value
        return found

    @property
    def minutes(self) -> float:
        last = [points[-1].time_s for points in (self.losses, *self.evals.values()) if points]
        return max(last, default=0.0) / 60

    @property
    def trained(self) -> float | None:
        return self.losses[-1].units if self.losses else None


def find_metrics(folder: Path) -> list[Path]:
    """The metrics files of a trainclock output folder (<out>/results/<system>/<workload>/), or of
    a folder that holds them directly."""
    if not folder.is_dir():
        raise DataError(f"--runs {folder} is not a folder; give a trainclock output folder (the --out of `trainclock run`)")
    found = sorted(folder.glob("results/*/*/result_*.metrics.jsonl")) or sorted(folder.rglob("result_*.metrics.jsonl"))
    if not found:
        raise DataError(f"--runs {folder} holds no result_<i>.metrics.jsonl; give the --out folder of `trainclock run`")
    return found


def read_curve(metrics_path: Path) -> RunCurve:
    """One run's curve. Rows are keyed by step, the last one winning: a resumed run may have
    written a step twice."""
    log_path = metrics_path.with_name(metrics_path.name.removesuffix(".metrics.jsonl") + ".txt")
    unit, metrics = _log_quality(log_path)
    losses: dict[int, Point] = {}
    evals: dict[str, dict[int, Point]] = {}
    first_form = False
    try:
        lines = metrics_path.read_text().splitlines()
    except OSError as e:
        raise DataError(f"cannot read {metrics_path}: {e.strerror}; rerun the benchmark or leave it out") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            progress_key = FIRST_FORM_UNIT if "units" not in row and FIRST_FORM_UNIT in row else "units"
            first_form = first_form or progress_key == FIRST_FORM_UNIT
            at = (float(row["time_s"]), float(row[progress_key]))
            step = int(row["step"])
            if "loss" in row:
                losses[step] = Point(*at, float(row["loss"]))
            elif "eval" in row:
                for name, value in _eval_values(row["eval"], metrics).items():
                    evals.setdefault(name, {})[step] = Point(*at, value)
        except (ValueError, KeyError, TypeError) as e:
            problem = f"no {e}" if isinstance(e, KeyError) else str(e)
            raise DataError(f"{metrics_path}:{lineno}: not a trainclock metrics row ({problem}); "
                            "the file is damaged: rerun the benchmark or leave it out") from None
    if first_form:
        unit = FIRST_FORM_UNIT
    label = "/".join((*metrics_path.parts[-3:-1], log_path.stem))
    return RunCurve(label, log_path, unit or "units", tuple(metrics), [losses[s] for s in sorted(losses)],
                    {name: [points[s] for s in sorted(points)] for name, points in evals.items()})


def _eval_values(value: object, metrics: tuple[Metric, ...]) -> dict[str, float]:
    """{metric name: value} of an eval row: a dict (one value per metric), or one number for the
    run's one metric."""
    if isinstance(value, dict):
        return {str(name): _number(v) for name, v in value.items()}
    name = metrics[0].name if len(metrics) == 1 else DEFAULT_METRIC
    return {name: _number(value)}


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"eval {value!r} is not a finite number")
    return float(value)


def _log_quality(log_path: Path) -> tuple[str | None, tuple[Metric, ...]]:
    if not log_path.is_file():
        return None, ()
    try:
        events, _ = read_events(log_path)
    except OSError as e:
        raise DataError(f"cannot read {log_path}: {e.strerror}; rerun the benchmark or leave it out") from None
    quality = log_quality(events)
    return quality.progress_unit, quality.metrics
