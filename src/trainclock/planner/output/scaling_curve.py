"""A scaling curve: predictions at several accelerator counts, with speedup and scaling
efficiency against the first, and cost; saved as JSON or CSV.

Two efficiencies (DESIGN.md, Scaling efficiency): time-to-train efficiency (T(N)/T(kN))/k, and
throughput efficiency, samples/s per accelerator at kN over that at N. They differ when a larger
batch needs more samples to converge."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import UsageError
from trainclock.planner.model.predict import Prediction
from trainclock.planner.model.run_cost import Price, run_cost
from trainclock.storage import atomic_write_text


@dataclass(frozen=True)
class CurvePoint:
    accelerators: int
    nodes: int
    layout: str  # as --layout takes it
    layout_short: str
    run_flags: str  # the `trainclock run` flags of its layout
    global_batch_size: int
    samples: int  # trained to the target
    progress: float  # the same in the benchmark's progress unit
    progress_unit: str  # e.g. tokens
    time_to_train_min: float
    speedup: float
    time_to_train_efficiency: float
    throughput_efficiency: float
    mfu: float
    memory_gb: float
    accelerator_hours: float
    cost_per_run: float | None
    energy_kwh: float | None


def parse_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise UsageError(f"--sweep {text!r}: give accelerator counts separated by commas, e.g. 512,1024,3584") from None
    if not counts or any(c < 1 for c in counts):
        raise UsageError(f"--sweep {text!r}: give at least one count, each >= 1")
    if len(set(counts)) != len(counts):
        raise UsageError(f"--sweep {text!r}: a count appears twice")
    return sorted(counts)


def curve(predictions: list[Prediction], price: Price | None) -> list[CurvePoint]:
    first = predictions[0]
    first_rate = first.samples_per_s / first.count
    points = []
    for p in predictions:
        speedup = first.time_to_train_s / p.time_to_train_s
        cost = run_cost(p, price)
        points.append(CurvePoint(
            accelerators=p.count,
            nodes=-(-p.count // p.accelerator.accelerators_per_node),
            layout=p.plan.describe(),
            layout_short=p.plan.short(),
            run_flags=" ".join(p.plan.layout.run_flags(p.accelerator.accelerators_per_node)),
            global_batch_size=p.global_batch_size,
            samples=p.samples,
            progress=p.units,
            progress_unit=p.cost.progress_unit,
            time_to_train_min=p.time_to_train_s / 60,
            speedup=speedup,
            time_to_train_efficiency=speedup / (p.count / first.count),
            throughput_efficiency=(p.samples_per_s / p.count) / first_rate,
            mfu=p.mfu,
            memory_gb=p.memory.total / 1e9,
            accelerator_hours=cost.accelerator_hours,
            cost_per_run=cost.per_run,
            energy_kwh=cost.energy_kwh,
        ))
    return points


def check_save_path(path: Path) -> None:
    """Before any work: the curve is saved as .json or .csv."""
    if path.suffix.lower() not in (".json", ".csv"):
        raise UsageError(f"--save {path}: name a .json or .csv file")


def save_curve(points: list[CurvePoint], path: Path, about: dict[str, object]) -> None:
    """Atomically, as JSON (with `about`: member, accelerator, calibration) or as CSV, by suffix."""
    check_save_path(path)
    rows = [vars(p) for p in points]
    if path.suffix.lower() == ".json":
        text = json.dumps({**about, "points": rows}, indent=2) + "\n"
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = out.getvalue()
    try:
        atomic_write_text(path, text)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}; choose another --save path") from None
