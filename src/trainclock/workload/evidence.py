"""A CPU member's target evidence: the reference runs that fixed its quality target, as
benchmarks/reference_targets.py records them in <workload package>/targets/<member>.json.

The file holds `targets` ({metric: threshold}), a one-line `summary`, the budget, machine,
precision and load, and `runs`: per seed its evals as [time_s, samples, units, {metric: value}],
samples/s and MFU. Every shipped file has this one format (tests/test_evidence_format.py).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from functools import cache
from importlib import resources

from trainclock.errors import DataError
from trainclock.workload.base import QualityTarget
from trainclock.workload.cost_model import ConvergencePoints


@cache
def load(package: str, member: str) -> dict:
    """The evidence of `member` shipped in `package` (a benchmark's package under trainclock.workloads)."""
    path = resources.files(package) / "targets" / f"{member}.json"
    try:
        evidence = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{member} has no target evidence ({package}/targets/{member}.json); measure it with "
                        f"benchmarks/reference_targets.py {member} --write") from None
    except ValueError as e:
        raise DataError(f"{package}/targets/{member}.json is not JSON ({e}); record it again") from None
    if not isinstance(evidence, dict):
        raise DataError(f"{package}/targets/{member}.json holds no evidence object; record it again")
    return evidence


def threshold(evidence: dict, metric: str) -> float:
    """The recorded target of `metric`."""
    targets = evidence.get("targets")
    value = targets.get(metric) if isinstance(targets, dict) else None
    if not isinstance(value, int | float):
        raise DataError(f"the target evidence has no number for {metric!r}; record it again")
    return float(value)


def is_measured(evidence: dict) -> bool:
    """Reference runs stand behind the target (not a provisional estimate)."""
    return bool(evidence.get("runs"))


def eval_points(run: dict, metric: str) -> list[tuple[float, float, float]]:
    """(time_s, units, value of `metric`) of one reference run's evaluations."""
    return [(time_s, units, metrics[metric]) for time_s, _, units, metrics in run.get("evals") or []]


def units_to_target(run: dict, quality: Sequence[QualityTarget]) -> float | None:
    """The progress units at which a reference run first met every target, or None."""
    curves = [eval_points(run, t.metric) for t in quality]
    for at in range(min(map(len, curves), default=0)):
        if all(t.met(curve[at][2]) for t, curve in zip(quality, curves)):
            return curves[0][at][1]
    return None


def mfus(runs: Sequence[dict] | None) -> list[float]:
    return [run["mfu"] for run in runs or [] if isinstance(run.get("mfu"), int | float)]


def convergence(member: str, runs: Sequence[dict], quality: Sequence[QualityTarget],
                global_batch_size: int, units_per_progress: float = 1) -> ConvergencePoints:
    """The planner's convergence point of a measured member: the median progress at which its
    reference runs first met every target, at the batch size they trained with; the runs record
    the loop's units, `units_per_progress` of them to one unit of the cost model's progress (an
    epoch's samples where the cost model counts epochs)."""
    reached = []
    for run in runs:
        try:
            units = units_to_target(run, quality)
        except (KeyError, TypeError, ValueError, IndexError):
            units = None
        if units is None:
            raise DataError(f"targets/{member}.json: a reference run (seed {run.get('seed')}) never met the target "
                            f"{', '.join(f'{t.metric} {t.threshold}' for t in quality)}; record it again")
        reached.append(units / units_per_progress)
    return ConvergencePoints(((global_batch_size, float(statistics.median(reached))),),
                             f"median of {len(reached)} trainclock reference runs")


def efficiency(member: str, recorded: dict[str, dict]) -> tuple[float, str] | None:
    """(median MFU, where it comes from) for planning a member on this machine's CPU: its own
    verification runs (full runs to the target), then its reference runs, then the reference runs
    of every measured member of the workload (`recorded`: member -> evidence)."""
    own = recorded.get(member) or {}
    for kind, runs in (("verification", (own.get("verification") or {}).get("runs")), ("reference", own.get("runs"))):
        if found := mfus(runs):
            return statistics.median(found), f"median MFU of {len(found)} {member} {kind} runs"
    found = [m for e in recorded.values() for m in mfus(e.get("runs"))]
    if not found:
        return None
    return statistics.median(found), f"median MFU of {len(found)} trainclock reference runs of {', '.join(recorded)}"
