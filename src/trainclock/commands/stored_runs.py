"""trainclock's own runs in the results store, as the planner calibrates on them (planner.own_runs):
finished runs of a member to its current target, with the header that says how they ran. The rest
are counted by why they were left out, so a user sees what the store held."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from trainclock.errors import UsageError
from trainclock.planner.calibration.own_runs import OwnRun
from trainclock.results.queries import FinishedRun
from trainclock.workload import registry

PRECISIONS = ("bf16", "fp32")
_LAYOUT_DEGREE = re.compile(r"\b(?:dp|tp|pp)=(\d+)")


@dataclass
class StoredRuns:
    runs: list[OwnRun] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)  # why -> how many

    def describe_left_out(self) -> str:
        return "; ".join(f"{n} {why}" for why, n in self.left_out.most_common())


def read_stored_runs(db: str | None) -> StoredRuns:
    """The finished runs in the store at `db` (default: the user's); DataError if it cannot be read."""
    from trainclock.results.db import open_reader, read
    from trainclock.results.queries import finished_runs

    with open_reader(db) as store:
        rows = read(store, finished_runs, "read the stored runs")
    found = StoredRuns()
    for row in rows:
        run, why = own_run(row)
        if run is None:
            found.left_out[why] += 1
        else:
            found.runs.append(run)
    return found


def read_this_machines_runs(db: str | None) -> StoredRuns:
    """The stored runs timed on this kind of CPU in one process (what this-cpu calibrates on), the
    others counted as left out; DataError if the store cannot be read."""
    from trainclock.device.system import cpu_identity
    from trainclock.planner.calibration.own_runs import same_machine

    stored = read_stored_runs(db)
    cpu = cpu_identity()  # reads /proc/cpuinfo: once, not per run
    mine = [r for r in stored.runs if same_machine(r, cpu)]
    if len(stored.runs) > len(mine):
        stored.left_out["on another kind of CPU, or in several processes"] += len(stored.runs) - len(mine)
    stored.runs = mine
    return stored


def own_run(row: FinishedRun) -> tuple[OwnRun | None, str]:
    """The run as the planner reads it, or None and why it cannot be used."""
    header = row.header if isinstance(row.header, dict) else {}
    name = header.get("trainclock_workload")
    try:
        _, member = registry.member(name) if isinstance(name, str) else (None, None)
    except UsageError:
        member = None
    if member is None or not member.target_source.startswith("measured"):
        return None, "not of a trainclock CPU tier"
    target = header.get("trainclock_target")  # the header keeps a key's first value: the first target
    if not (_number(target) and math.isclose(target, member.quality[0].threshold, rel_tol=1e-9)):
        return None, "trained to another target than the tier's current one"
    precision, threads, cpu = (header.get(k) for k in ("trainclock_precision", "trainclock_threads", "trainclock_cpu"))
    accumulation, batch = header.get("gradient_accumulation_steps"), row.global_batch_size
    if precision not in PRECISIONS or not _whole(threads) or not isinstance(cpu, str) or not _whole(accumulation):
        return None, "logged before runs recorded their CPU, precision and threads"
    processes = math.prod(int(d) for d in _LAYOUT_DEGREE.findall(str(header.get("trainclock_parallel_layout", ""))))
    if not (_whole(batch) and _number(row.samples_to_converge) and batch % accumulation == 0 and processes >= 1):
        return None, "without batch or progress figures"
    return OwnRun(
        member=member.name, label=f"{row.file_name} seed {header.get('seed')}", cpu=cpu, precision=precision,
        threads=int(threads), processes=processes, global_batch_size=int(batch),
        micro_batch=int(batch) // int(accumulation) // processes,
        time_to_train_s=row.time_to_train_ms / 1000, samples=float(row.samples_to_converge),
        peak_flops=float(peak) if _number(peak := header.get("trainclock_matmul_peak_flops")) else None,
        eval_spans=_spans(row.eval_spans),
    ), ""


def _spans(stored) -> tuple[tuple[float | None, float, float], ...] | None:
    """The store's [[samples, start, stop], ...]; None where it holds none or something else."""
    try:
        return tuple((None if n is None else float(n), float(a), float(b)) for n, a, b in stored) or None
    except (TypeError, ValueError):
        return None


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
