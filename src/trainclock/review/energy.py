"""The energy score of a power entry (from the first round with power: a `power/` folder beside the result logs), as the
official result summarizer computes its Energy column: per run, each node's power readings
integrated between power_measurement_start and _stop and scaled to the run's time-to-train, plus
each switch's estimated interconnect power over that time, times the logged conversion efficiency;
then the mean over the runs its time score averages, times the scaling factor. In joules.

The layout is power/<result file's stem>/node_*.txt and sw_*.txt, MLLOG lines as in a result log.
Where a node's measurement starts and stops at the same millisecond the installed summarizer
divides by zero and crashes; trainclock gives no energy for the entry and says why instead."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trainclock.review.run_review import RunReview

POWER_FOLDER = "power"
MARKER = ":::MLLOG "


@dataclass(frozen=True)
class EnergyScore:
    joules: float | None  # None where it cannot be computed: `problem` says why
    runs: int  # the runs averaged
    problem: str | None = None

    def as_json(self) -> dict:
        return {"joules": self.joules, "runs_averaged": self.runs, "problem": self.problem}


def has_power(folder: Path) -> bool:
    return (folder / POWER_FOLDER).is_dir()


def energy_score(folder: Path, used: Sequence[RunReview], scaling: float) -> EnergyScore:
    """The entry's energy from the power logs of the runs its time score averages (`used`)."""
    energies = []
    for run in used:
        try:
            energies.append(run_energy(folder / POWER_FOLDER / run.path.name.split(".")[0], run.time_to_train_ms))
        except (OSError, ValueError, KeyError, TypeError) as e:
            return EnergyScore(None, len(used), f"{run.path.name}: {e}")
    if not energies:
        return EnergyScore(None, 0, "no run left to average")
    return EnergyScore(sum(energies) / len(energies) * scaling, len(energies))


def run_energy(power_dir: Path, time_to_train_ms: float) -> float:
    """One run's energy in joules: its nodes' and switches' power logs, in the summarizer's arithmetic."""
    nodes = sorted(power_dir.glob("node_*.txt"))
    if not nodes:
        raise ValueError(f"no {power_dir.name}/node_*.txt power logs")
    total = 0.0
    for node in nodes:
        total += _node_energy(_events(node), time_to_train_ms, node)
    for switch in sorted(power_dir.glob("sw_*.txt")):
        total += _switch_energy(_events(switch), time_to_train_ms)
    return total


def _events(path: Path) -> list[tuple[float, str, object]]:
    """(time_ms, key, value) of each MLLOG line, in file order; the summarizer reads the text after
    the last marker of a line, as latin-1."""
    found = []
    for line in path.read_text(encoding="latin-1").splitlines():
        at = line.rfind(MARKER)
        if at < 0:
            continue
        event = json.loads(line[at + len(MARKER):].strip())
        found.append((float(event["time_ms"]), event["key"], event["value"]))
    return found


def _node_energy(events: list[tuple[float, str, object]], time_to_train_ms: float, path: Path) -> float:
    previous = last = start = stop = 0.0
    total, efficiency = 0.0, 1.0
    started = stopped = False
    for time_ms, key, value in sorted(events, key=lambda e: e[0]):  # stable: ties keep the file's order
        if key == "power_measurement_start":
            start = previous = time_ms
            started = True
        if key == "power_reading" and started and not stopped:
            total += value * (time_ms - previous)
            previous = time_ms
            last = max(last, time_ms)
        if key == "power_measurement_stop":
            stop, stopped = time_ms, True
        if key == "conversion_eff":
            efficiency = value
    if not started:
        raise ValueError(f"{path.name} has no power_measurement_start")
    if not stopped:
        stop = last  # as the summarizer: the last reading stands for the stop
    if stop == start:
        raise ValueError(f"{path.name}: its power measurement starts and stops at the same time ({start:.0f} ms), "
                         "so no power can be averaged over it (the installed summarizer crashes here)")
    return efficiency * total * time_to_train_ms / (stop - start) / 1000


def _switch_energy(events: list[tuple[float, str, object]], time_to_train_ms: float) -> float:
    power, efficiency = 0.0, 1.0
    for _, key, value in events:
        if key == "conversion_eff":
            efficiency = value
        if key == "interconnect_power_est":
            power = value
            break
    return efficiency * power * time_to_train_ms / 1000
