"""A scaling sweep: the same benchmark, with the same seeds, at several process counts, each run
a separate `trainclock run` process. Every number comes from the runs' files (the MLPerf log
for time-to-train, metrics.jsonl for throughput), never from memory, so a sweep's table can be
rebuilt from its result tree alone.

  efficiency(N -> kN) = (T(N) / T(kN)) / k, relative to the first (smallest) size,
for throughput (T = time per token) and for time-to-train, which differ when a run needs more
or fewer samples to reach its target.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainclock.errors import DataError, TrainclockError, UsageError
from trainclock.mllog.reader import read_events
from trainclock.mllog.time_to_train import NoTimeToTrain, run_status, time_to_train_ms
from trainclock.storage import atomic_write_text

# Runs `trainclock <argv>` with these extra environment variables; returns its exit code.
Runner = Callable[[list[str], dict[str, str]], int]


@dataclass(frozen=True)
class SweepPlan:
    benchmark: str
    sizes: tuple[int, ...]  # process counts, increasing
    repeats: int
    seed: int  # repeat r uses seed + r at every size, so sizes are compared on the same runs
    out: Path  # size N writes its result tree to <out>/nproc-<N>
    run_args: tuple[str, ...] = ()  # further `trainclock run` arguments
    cpu_threads: int | None = None  # total CPU threads per size, split evenly over its processes

    def tree(self, nproc: int) -> Path:
        return self.out / f"nproc-{nproc}"

    def run_argv(self, nproc: int, repeat: int) -> list[str]:
        return ["run", self.benchmark, "--nproc", str(nproc), "--seed", str(self.seed + repeat),
                "--no-progress", "--out", str(self.tree(nproc)), *self.run_args]

    def run_env(self, nproc: int) -> dict[str, str]:
        # torchrun sets 1 thread per process when more than one start and nothing is set, while
        # one process takes every core: fix the total instead, or the sizes compare unlike things
        return {"OMP_NUM_THREADS": str(self.cpu_threads // nproc)} if self.cpu_threads else {}


def check(plan: SweepPlan) -> None:
    if not plan.sizes:
        raise UsageError("--nproc needs at least one process count, e.g. --nproc 1,2,4")
    if any(n < 1 for n in plan.sizes) or list(plan.sizes) != sorted(set(plan.sizes)):
        raise UsageError(f"--nproc must list increasing positive process counts, e.g. 1,2,4; got "
                         f"{','.join(map(str, plan.sizes))}")
    if plan.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {plan.repeats}")
    if plan.cpu_threads is not None and plan.cpu_threads < plan.sizes[-1]:
        raise UsageError(f"--cpu-threads {plan.cpu_threads} cannot give each of {plan.sizes[-1]} processes a thread; "
                         f"use at least {plan.sizes[-1]}")


def parse_sizes(text: str) -> tuple[int, ...]:
    """'1,2,4' -> (1, 2, 4)."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--nproc must be comma-separated process counts such as 1,2,4, got {text!r}") from None


@dataclass(frozen=True)
class RunMeasurement:
    nproc: int
    repeat: int
    seed: int
    log: str
    status: str  # run_stop's status: success or aborted
    time_to_train_s: float  # run_stop - run_start
    units_per_s: float  # training steps only
    steps: int
    hardware: float = 0.0  # what the run computed on, in hardware_unit (0: not known, count processes)
    hardware_unit: str = "processes"


@dataclass(frozen=True)
class SizeRow:
    nproc: int
    runs: int
    successes: int
    units_per_s: float  # mean over the repeats
    time_to_train_s: float  # mean over the repeats
    speedup: float  # time-to-train of the first size / this one's
    throughput_efficiency: float  # speedups over the growth in `hardware` (SweepResult.hardware_unit)
    time_to_train_efficiency: float
    hardware: float = 0.0  # mean over the repeats, in the runs' hardware unit


@dataclass
class SweepResult:
    plan: SweepPlan
    runs: list[RunMeasurement] = field(default_factory=list)

    @property
    def rows(self) -> list[SizeRow]:
        # with a fixed CPU thread total the hardware does not grow with the process count
        return summarize(self.runs, fixed_hardware=self.plan.cpu_threads is not None)

    @property
    def hardware_unit(self) -> str:
        """What efficiency divided by: the runs' hardware unit where every run knows it."""
        units = {r.hardware_unit if r.hardware else "processes" for r in self.runs}
        return units.pop() if len(units) == 1 else "processes"


def subprocess_runner(argv: list[str], env: dict[str, str]) -> int:
    """`trainclock <argv>` as a child process of this Python, its output passed through."""
    return subprocess.run([sys.executable, "-m", "trainclock.cli", *argv], env={**os.environ, **env}).returncode


def run_sweep(plan: SweepPlan, runner: Runner | None = None,
              on_run: Callable[[RunMeasurement], None] | None = None) -> SweepResult:
    """Every size, `repeats` times, through `runner` (default: child processes); each run
    measured from the log it leaves."""
    check(plan)
    runner = runner or subprocess_runner
    result = SweepResult(plan)
    for nproc in plan.sizes:
        for repeat in range(plan.repeats):
            argv = plan.run_argv(nproc, repeat)
            before = _logs(plan.tree(nproc))
            code = runner(argv, plan.run_env(nproc))
            new = sorted(_logs(plan.tree(nproc)) - before)
            # exit code 1 is a run that stopped at a limit before its target: still a measurement
            if code not in (0, 1) or len(new) != 1:
                found = f"{len(new)} new logs" if code in (0, 1) else f"exit code {code}"
                raise TrainclockError(f"the run with {nproc} process(es) (repeat {repeat + 1}) failed ({found}); "
                                      f"its output is above. Command: trainclock {' '.join(argv)}")
            measured = measure(new[0], nproc, repeat, plan.seed + repeat)
            result.runs.append(measured)
            if on_run:
                on_run(measured)
    return result


def _logs(tree: Path) -> set[Path]:
    return set(tree.glob("results/*/*/result_*.txt"))


def measure(log: Path, nproc: int, repeat: int, seed: int) -> RunMeasurement:
    """Time-to-train from the MLPerf log, throughput from its metrics file."""
    events, _ = read_events(log)
    try:
        ttt_ms = time_to_train_ms(events)
    except NoTimeToTrain as e:
        raise DataError(f"{log}: no time-to-train ({e}); the run did not finish") from None
    units_per_s, steps = training_throughput(log.with_name(log.stem + ".metrics.jsonl"))
    amount, unit = hardware_in_use(log, nproc)
    return RunMeasurement(nproc, repeat, seed, str(log), run_status(events), ttt_ms / 1000, units_per_s, steps,
                          amount, unit)


CORES = "CPU cores in use"
_THREADS = re.compile(r"torch intra-op threads: (\d+)")  # device.system.describe's hw_notes


def hardware_in_use(log: Path, nproc: int) -> tuple[float, str]:
    """What a run computed on, from the system description its tree keeps beside the results
    (systems/<system>.json): accelerators, one per process; on CPUs the cores its processes' threads
    occupy, at most the machine's, since more processes on the same cores add no hardware."""
    system = log.parents[3] / "systems" / f"{log.parents[1].name}.json"
    try:
        fields = json.loads(system.read_text())
    except (OSError, ValueError, IndexError):
        return float(nproc), "processes"
    if not isinstance(fields, dict):
        return float(nproc), "processes"
    if fields.get("accelerator_model_name"):
        return float(nproc), "accelerators"
    threads = _THREADS.search(str(fields.get("hw_notes", "")))
    try:
        cores = int(fields.get("host_processor_vcpu_count") or fields.get("host_processor_core_count") or 0)
    except ValueError:
        cores = 0
    if threads is None or cores < 1:
        return float(nproc), "processes"
    return float(min(nproc * int(threads.group(1)), cores)), CORES


def training_throughput(metrics: Path) -> tuple[float, int]:
    """Units (the workload's: tokens, images, ...) per second over the training steps (evaluations
    excluded), and the step count.
    Rows are keyed by step, the last one winning: a resumed run may have written a step twice."""
    try:
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read the metrics file {metrics}: {e}; rerun the benchmark") from None
    # metrics files before the workload interface counted in tokens: "tokens", "tokens_per_s"
    steps = {row["step"]: _units_row(row) for row in rows if "step" in row and ("units_per_s" in row or "tokens_per_s" in row)}
    if not steps:
        raise DataError(f"{metrics} has no training steps; rerun the benchmark")
    units, seconds, previous = 0, 0.0, 0
    for step in sorted(steps):
        step_units = steps[step]["units"] - previous  # "units" is cumulative
        previous = steps[step]["units"]
        units += step_units
        seconds += step_units / steps[step]["units_per_s"]
    return units / seconds, len(steps)


def _units_row(row: dict) -> dict:
    if "units_per_s" in row:
        return row
    return {**row, "units": row["tokens"], "units_per_s": row["tokens_per_s"]}


def summarize(runs: list[RunMeasurement], fixed_hardware: bool = False) -> list[SizeRow]:
    """One row per size: means over repeats, and speedup and efficiencies against the first size.
    Efficiency divides the speedup by the growth in hardware the runs used (accelerators, or CPU
    cores in use: 2 processes x 1 thread on the cores 1 process x 2 threads had is no growth);
    where a run's hardware is not known, by the growth in processes; fixed_hardware: by 1."""
    sizes = sorted({r.nproc for r in runs})
    rows: list[SizeRow] = []
    for nproc in sizes:
        mine = [r for r in runs if r.nproc == nproc]
        throughput = statistics.fmean(r.units_per_s for r in mine)
        ttt = statistics.fmean(r.time_to_train_s for r in mine)
        hardware = statistics.fmean(r.hardware or r.nproc for r in mine)
        base = rows[0] if rows else None
        k = hardware / base.hardware if base and not fixed_hardware else 1.0
        base_throughput = base.units_per_s if base else throughput
        base_ttt = base.time_to_train_s if base else ttt
        rows.append(SizeRow(
            nproc=nproc, runs=len(mine), successes=sum(r.status == "success" for r in mine), hardware=hardware,
            units_per_s=throughput, time_to_train_s=ttt, speedup=base_ttt / ttt,
            throughput_efficiency=(throughput / base_throughput) / k,
            time_to_train_efficiency=(base_ttt / ttt) / k,
        ))
    return rows


def save(result: SweepResult) -> tuple[Path, Path]:
    """<out>/scaling-<benchmark>.json (plan, every run, the table) and .csv (the table)."""
    plan = result.plan
    rows = result.rows
    json_path, csv_path = (plan.out / f"scaling-{plan.benchmark}.{ext}" for ext in ("json", "csv"))
    document = {
        "benchmark": plan.benchmark, "sizes": list(plan.sizes), "repeats": plan.repeats, "seed": plan.seed,
        "run_args": list(plan.run_args), "cpu_threads": plan.cpu_threads,
        "efficiency": "(T(N) / T(kN)) / k against the first size; T = time per token (throughput) or time-to-train; "
                      f"k = the growth in {result.hardware_unit}" + (" (fixed: --cpu-threads)" if plan.cpu_threads else ""),
        "rows": [asdict(r) for r in rows], "runs": [asdict(r) for r in result.runs],
    }
    atomic_write_text(json_path, json.dumps(document, indent=2) + "\n")
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(asdict(rows[0])), lineterminator="\n")
    writer.writeheader()
    writer.writerows(asdict(r) for r in rows)
    atomic_write_text(csv_path, table.getvalue())
    return json_path, csv_path
