"""trainclock's own runs as curves: per-step loss and the evaluations from
result_<i>.metrics.jsonl, the quality target from the MLPerf log beside it (trainclock_target)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trainclock.errors import DataError
from trainclock.mllog.reader import Event, read_events

TARGET_KEY = "trainclock_target"


@dataclass(frozen=True)
class Point:
    time_s: float
    tokens: float
    value: float


@dataclass
class RunCurve:
    label: str  # <system>/<workload>/result_<i>
    log_path: Path
    target: float | None  # validation log perplexity the run had to reach
    losses: list[Point] = field(default_factory=list)
    evals: list[Point] = field(default_factory=list)


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
    losses: dict[int, Point] = {}
    evals: dict[int, Point] = {}
    try:
        lines = metrics_path.read_text().splitlines()
    except OSError as e:
        raise DataError(f"cannot read {metrics_path}: {e.strerror}; rerun the benchmark or leave it out") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            point_at = (float(row["time_s"]), float(row["tokens"]))
            if "loss" in row:
                losses[int(row["step"])] = Point(*point_at, float(row["loss"]))
            elif "eval" in row:
                evals[int(row["step"])] = Point(*point_at, float(row["eval"]))
        except (ValueError, KeyError, TypeError) as e:
            problem = f"no {e}" if isinstance(e, KeyError) else str(e)
            raise DataError(f"{metrics_path}:{lineno}: not a trainclock metrics row ({problem}); "
                            "the file is damaged: rerun the benchmark or leave it out") from None
    label = "/".join((*metrics_path.parts[-3:-1], log_path.stem))
    return RunCurve(label, log_path, _target(log_path), [losses[s] for s in sorted(losses)],
                    [evals[s] for s in sorted(evals)])


def _target(log_path: Path) -> float | None:
    if not log_path.is_file():
        return None
    events, _ = read_events(log_path)
    return next((float(e.value) for e in events if _is_target(e)), None)


def _is_target(event: Event) -> bool:
    return event.key == TARGET_KEY and isinstance(event.value, int | float)
