"""`trainclock scale BENCHMARK --nproc 1,2,4`: run the benchmark at each process count and print
speedup and scaling efficiency, read from the runs' logs; the table is saved as JSON and CSV."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trainclock.console import table_console

from trainclock.commands.launch import add_command, check_run_args

# run flags the sweep sets itself
_OWNED = {
    "--nproc": "list the sizes with --nproc before `--`",
    "--seed": "use --seed before `--` (repeat r uses seed + r at every size)",
    "--out": "use --out before `--`",
    "--nnodes": "a sweep runs on one node",
    "--node-rank": "a sweep runs on one node",
    "--rdzv": "a sweep runs on one node",
}


def register(sub) -> None:
    scale = add_command(sub, "scale", help="run a benchmark at several process counts; speedup and scaling efficiency",
                        description="Run BENCHMARK at each process count (same seeds), then print throughput, "
                                    "time-to-train, speedup and efficiency (T(N) / T(kN)) / k, read from the logs.",
                        epilog="arguments after `--` go to every `trainclock run` of the sweep "
                               "(e.g. -- --max-samples 4096 --data PATH)")
    scale.add_argument("benchmark", help="a member (<benchmark>-<size>) or an MLPerf key for the full size "
                                         "(see `trainclock list`)")
    scale.add_argument("--nproc", required=True, help="process counts, increasing, e.g. 1,2,4")
    scale.add_argument("--repeats", type=int, default=1, help="runs per size (default: %(default)s)")
    scale.add_argument("--seed", type=int, help="seed of the first repeat at every size (default: a fresh one)")
    scale.add_argument("--out", type=Path, default=Path("trainclock-scaling"),
                       help="sweep folder: a result tree per size, and the table (default: %(default)s)")
    scale.add_argument("--cpu-threads", type=int,
                       help="CPU threads per size, shared by its processes (OMP_NUM_THREADS = this / processes); "
                            "default: trainclock run's own choice")
    scale.set_defaults(func=main)


def main(args) -> int:
    from trainclock import sweep
    from trainclock.workload import registry

    _, member = registry.member(args.benchmark)  # an unknown name fails here, before any run
    check_run_args(args.benchmark, args.run_args, _OWNED)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    plan = sweep.SweepPlan(benchmark=args.benchmark, sizes=sweep.parse_sizes(args.nproc), repeats=args.repeats,
                           seed=seed, out=args.out, run_args=tuple(args.run_args), cpu_threads=args.cpu_threads)
    sweep.check(plan)
    console = table_console()
    console.print(f"trainclock scale: {plan.benchmark} at {', '.join(map(str, plan.sizes))} process(es), "
                  f"{plan.repeats} run(s) each, seeds {seed}..{seed + plan.repeats - 1}")
    result = sweep.run_sweep(plan, on_run=lambda m: console.print(
        f"[dim]{m.nproc} process(es), repeat {m.repeat + 1}: {m.status}, {m.time_to_train_s:.1f} s, "
        f"{m.units_per_s:,.0f} {member.unit}/s[/dim]"))
    print_table(result, console, unit=member.unit)
    json_path, csv_path = sweep.save(result)
    # paths whole on one line, to copy; no markup, since a path may hold [brackets]
    console.print(f"saved {json_path} and {csv_path}", soft_wrap=True, markup=False)
    return 0


def print_table(result, console: Console | None = None, unit: str = "samples") -> None:
    """The sweep's table: one row per process count."""
    console = table_console(console)
    rows = result.rows
    base = rows[0].nproc
    hardware = result.hardware_unit
    growth = ("1 (the same CPU threads, split)" if result.plan.cpu_threads
              else f"the growth in {hardware} (the hw column)")
    table = Table(title=f"{result.plan.benchmark} scaling",
                  caption=f"TTT: time-to-train (run_stop - run_start), mean of the runs; efficiency: "
                          f"(T({base}) / T(N)) / {growth}, T = time per {unit.rstrip('s')} (thr.) or TTT")
    # short headers: the table must fit an 80-column terminal
    for name in ("procs", "hw", "reached\ntarget", f"{unit}/s", "TTT (s)", "speedup\n(TTT)", "thr. eff.", "TTT eff."):
        table.add_column(name, justify="right")
    short = {"CPU cores in use": "cores", "accelerators": "acc.", "processes": "procs"}[hardware]
    for row in rows:
        table.add_row(str(row.nproc), f"{row.hardware:g} {short}", f"{row.successes}/{row.runs}", f"{row.units_per_s:,.0f}",
                      f"{row.time_to_train_s:,.1f}", f"{row.speedup:.2f}x", f"{row.throughput_efficiency:.1%}",
                      f"{row.time_to_train_efficiency:.1%}")
    if any(row.successes < row.runs for row in rows):
        table.caption += ("; runs that stopped at a limit before the target: their TTT is the time to that limit, "
                          "not to the quality target")
    console.print(table)
