"""A planner scaling curve saved by `trainclock plan MEMBER --accelerator ID --sweep ... --save
FILE.json` (planner/sweep.py), and the stored entries it predicts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainclock.errors import DataError
from trainclock.results.queries import EntryRow


@dataclass(frozen=True)
class PredictedPoint:
    accelerators: int
    time_to_train_min: float
    time_to_train_efficiency: float
    cost_per_run: float | None


@dataclass(frozen=True)
class PlannerCurve:
    path: Path
    member: str
    accelerator: str  # catalogue id, e.g. h100-sxm
    calibration: str
    price: str | None  # as given to the planner (--price), when it priced the curve
    points: list[PredictedPoint]
    # the name its entries have in the store: the MLPerf key for a benchmark's full-size member
    # (the curve's "benchmark", saved by the planner), else the member's own name
    stored_as: str | None = None

    @property
    def benchmark(self) -> str:
        return self.stored_as or self.member

    def measured(self, rows: list[EntryRow]) -> list[EntryRow]:
        """Entries of the same benchmark on the same kind of accelerator: the catalogue's family
        name ("h100" of h100-sxm) within the system's accelerator model."""
        family = self.accelerator.split("-")[0].lower()
        return [r for r in rows if r.benchmark == self.benchmark and r.accelerators
                and family in (r.accelerator_model or "").lower()]


def load_planner_curve(path: Path) -> PlannerCurve:
    if path.suffix.lower() != ".json":
        raise DataError(f"--plan {path}: give the .json file of `trainclock plan ... --sweep ... --save FILE.json` "
                        "(a .csv has no member or accelerator)")
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        points = [PredictedPoint(int(p["accelerators"]), float(p["time_to_train_min"]),
                                 float(p["time_to_train_efficiency"]), p.get("cost_per_run"))
                  for p in data["points"]]
        return PlannerCurve(path, str(data["member"]), str(data["accelerator"]), str(data.get("calibration", "")),
                            data.get("price"), points, _text_or_none(data.get("benchmark")))
    except OSError as e:
        raise DataError(f"cannot read --plan {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"--plan {path} is not a saved planner curve ({type(e).__name__}: {e}); "
                        "write one with `trainclock plan MEMBER --accelerator ID --sweep N1,N2 --save FILE.json`") from None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
