"""Quality reached: an evaluation's values by metric name, and the best of them in each metric's
direction (max where higher is better, min where lower is)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from trainclock.review.benchmarks import Metric


def eval_values(value: float | None, value_json: Any, metric: str | None,
                metrics: Sequence[Metric]) -> dict[str, float]:
    """{metric name: value} of one stored evaluation: a dict value ({"BBOX": .., "SEGM": ..}), a
    line naming its metric (metadata "metric": FID, CLIP), or the one metric of its run."""
    if isinstance(value_json, dict):
        return {str(k): float(v) for k, v in value_json.items() if _finite(v)}
    if value is None or not _finite(value):
        return {}
    if metric:
        return {metric: float(value)}
    return {metrics[0].name: float(value)} if len(metrics) == 1 else {}


def best_values(points: Iterable[dict[str, float]], metrics: Sequence[Metric]) -> dict[str, float]:
    """The best value of each known metric over the points, in its direction."""
    points = list(points)
    found: dict[str, float] = {}
    for metric in metrics:
        best = metric.best([p[metric.name] for p in points if metric.name in p])
        if best is not None:
            found[metric.name] = best
    return found


def shown_values(values: dict[str, float], metrics: Sequence[Metric]) -> str:
    """"0.7221 masked-LM accuracy", several joined with ", "; "—" for none."""
    parts = [f"{values[m.name]:.4g} {m.shown}" for m in metrics if m.name in values]
    return ", ".join(parts) if parts else "—"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
