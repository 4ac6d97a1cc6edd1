"""Scaling on this CPU: 1 process x T threads against T processes x 1 thread (T = the core count,
2 here), each a real `trainclock run` of gpt3-mini with the same seed, measured from its log and
metrics file by trainclock's own scaling sweep. Prints the throughput efficiency (goal >= 0.9:
data parallelism over gloo should cost little next to intra-op threads) and, with --fsdp, the
peak memory of every rank under FSDP2 next to DDP's; with --pipeline, pipeline parallel over the
same processes under each schedule (GPipe, 1F1B, interleaved 1F1B), its throughput and memory
next to DDP's.

  python benchmarks/scaling.py [--member gpt3-mini] [--max-samples 64] [--repeats 1] [--fsdp] [--pipeline]
                               [--data PATH] [--out DIR]

Threads: `trainclock run` does not set thread counts. A single process gets torch's default (one
thread per core); under torchrun with several processes, torchrun sets OMP_NUM_THREADS=1 per
worker unless it is set already. This script fixes the total instead: OMP_NUM_THREADS = T / N.

Memory: every Python process of a run (the launcher, torchrun's agent, each rank) loads a small
sitecustomize hook from a temporary folder on PYTHONPATH that records its own peak resident set
(getrusage ru_maxrss) at exit, tagged with its RANK: exact per process, no polling.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from trainclock.console import table_console
from rich.table import Table

from trainclock.commands.scale import print_table
from trainclock import sweep

HOOK = """\
import atexit, json, os, resource, sys

def _record_peak_rss():
    folder = os.environ.get("TRAINCLOCK_BENCH_RSS_DIR")
    if folder:
        record = {"rank": os.environ.get("RANK"), "argv": sys.argv[:2],
                  "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as f:
            json.dump(record, f)

atexit.register(_record_peak_rss)
"""


class PeakMemoryRunner:
    """Runs `trainclock run` as the sweep would, and keeps each run's peak RSS per rank (MiB)."""

    def __init__(self, hook_dir: Path) -> None:
        self.hook_dir = hook_dir
        (hook_dir / "sitecustomize.py").write_text(HOOK)
        self.peaks: list[dict[str, float]] = []  # one per run, in run order: rank ("0", "1"...) -> MiB

    def __call__(self, argv: list[str], env: dict[str, str]) -> int:
        records = Path(tempfile.mkdtemp(prefix="rss-", dir=self.hook_dir))
        path = os.pathsep.join(filter(None, [str(self.hook_dir), os.environ.get("PYTHONPATH")]))
        code = sweep.subprocess_runner(argv, {**env, "PYTHONPATH": path, "TRAINCLOCK_BENCH_RSS_DIR": str(records)})
        found = [json.loads(p.read_text()) for p in records.glob("*.json")]
        if not found:
            sys.exit(f"scaling.py: no process recorded its memory: is another sitecustomize shadowing {self.hook_dir}?")
        ranked = {r["rank"]: r["maxrss_mib"] for r in found if r["rank"] is not None}
        runs = [r["maxrss_mib"] for r in found if r["argv"][1:2] == ["run"]]
        if not ranked and runs:  # a single process is not under torchrun: the run itself is rank 0
            ranked = {"0": max(runs)}
        self.peaks.append(dict(sorted(ranked.items())))
        return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--member", default="gpt3-mini")
    parser.add_argument("--max-samples", type=int, default=64, help="sequences per run (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--data", help="corpus for `trainclock run --data` (default: the member's)")
    parser.add_argument("--fsdp", action="store_true", help="also run FSDP2 and compare peak memory per rank with DDP")
    parser.add_argument("--pipeline", action="store_true",
                        help="also run pipeline parallel under each schedule and compare with DDP")
    parser.add_argument("--out", type=Path, help="keep the result trees here (default: a temporary folder)")
    args = parser.parse_args()

    threads = os.cpu_count() or 1
    if threads < 2:
        sys.exit("scaling.py: this machine has 1 CPU core; 1 x 1 against 1 x 1 measures nothing")
    console = table_console()
    work = Path(tempfile.mkdtemp(prefix="trainclock-scaling-"))
    out = args.out or work / "runs"
    run_args = ("--max-samples", str(args.max_samples), "--device", "cpu", *(("--data", args.data) if args.data else ()))
    runner = PeakMemoryRunner(work)
    console.print(f"{args.member}: 1 process x {threads} threads against {threads} processes x 1 thread, "
                  f"{args.max_samples} sequences per run, seed {args.seed}; result trees in {out}", soft_wrap=True)

    plan = sweep.SweepPlan(args.member, (1, threads), args.repeats, args.seed, out, run_args, cpu_threads=threads)
    load_before = os.getloadavg()[0]
    result = sweep.run_sweep(plan, runner)
    print_table(result, console, unit="tokens")
    efficiency = result.rows[-1].throughput_efficiency
    console.print(f"throughput efficiency 1 x {threads} -> {threads} x 1: {efficiency:.3f} "
                  f"({'meets' if efficiency >= 0.9 else 'misses'} the goal >= 0.9)")
    # the cores are shared: other work slows a process whose threads wait for each other most
    console.print(f"1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {threads} cores"
                  + ("; above 1.0 the baseline was slowed, likely by other load: rerun on an idle machine"
                     if efficiency > 1.05 else ""))

    if args.fsdp:
        ddp_peaks = runner.peaks[-1]  # the last run of the sweep: the largest size, DDP
        fsdp_plan = sweep.SweepPlan(args.member, (threads,), 1, args.seed, out / "fsdp", (*run_args, "--fsdp"),
                                    cpu_threads=threads)
        fsdp = sweep.run_sweep(fsdp_plan, runner)
        print_memory(console, runner.peaks[0], ddp_peaks, runner.peaks[-1], threads)
        ratio = fsdp.runs[0].units_per_s / result.runs[-1].units_per_s
        console.print(f"FSDP2 throughput: {fsdp.runs[0].units_per_s:,.0f} tokens/s, {ratio:.2f}x DDP's")

    if args.pipeline:
        ddp_run, ddp_peaks = result.runs[-1], runner.peaks[len(result.runs) - 1]
        table = Table(title=f"pipeline parallel over {threads} processes (pp={threads}) against DDP")
        for column in ("layout", "tokens/s", "/ DDP", "peak MiB per rank"):
            table.add_column(column, justify="left" if column == "layout" else "right")
        table.add_row(f"DDP x {threads}", f"{ddp_run.units_per_s:,.0f}", "1.00", _peaks(ddp_peaks))
        for schedule in ("gpipe", "1f1b", "interleaved-1f1b"):
            flags = ("--pp", str(threads), "--pp-schedule", schedule)
            plan = sweep.SweepPlan(args.member, (threads,), 1, args.seed, out / schedule, (*run_args, *flags),
                                   cpu_threads=threads)
            measured = sweep.run_sweep(plan, runner).runs[0]
            table.add_row(f"pp={threads} {schedule}", f"{measured.units_per_s:,.0f}",
                          f"{measured.units_per_s / ddp_run.units_per_s:.2f}", _peaks(runner.peaks[-1]))
        console.print(table)


def _peaks(per_rank: dict[str, float]) -> str:
    return " / ".join(f"{mib:,.0f}" for _, mib in sorted(per_rank.items(), key=lambda item: int(item[0])))


def print_memory(console: Console, single: dict[str, float], ddp: dict[str, float], fsdp: dict[str, float],
                 processes: int) -> None:
    table = Table(title="peak resident memory per rank (MiB, getrusage ru_maxrss)")
    table.add_column("rank", justify="right")
    table.add_column("1 process", justify="right")
    table.add_column(f"DDP x {processes}", justify="right")
    table.add_column(f"FSDP2 x {processes}", justify="right")
    table.add_column("FSDP2 / DDP", justify="right")
    for rank in sorted(set(ddp) | set(fsdp), key=int):
        d, f = ddp.get(rank), fsdp.get(rank)
        table.add_row(rank, f"{single[rank]:,.0f}" if rank in single else "",
                      f"{d:,.0f}" if d else "missing", f"{f:,.0f}" if f else "missing",
                      f"{f / d:.2f}" if d and f else "")
    console.print(table)


if __name__ == "__main__":
    main()
