"""The table a finished run prints: time-to-train, quality against the target, throughput, MFU."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from trainclock.console import table_console
from trainclock.train.profile import EVALUATION, REGIONS, ProfileReport
from trainclock.train.run import RunResult


def print_run_summary(result: RunResult, console: Console | None = None) -> None:
    console = table_console(console)
    o = result.outcome
    table = Table(title=f"run {o.status}", show_header=False, title_style="bold green" if o.status == "success" else "bold red")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("time-to-train", f"{result.time_to_train_ms / 60000:.3f} min ({result.time_to_train_s:.1f} s, run_stop - run_start)")
    # several targets count only together, at one evaluation: their values are the last
    # evaluation's (the one that met them all, on success), not each metric's best of the run
    together = len(result.quality) > 1 or o.status == "success"
    for target in result.quality:
        values = [m[target.metric] for _, m in o.evals if target.metric in m and math.isfinite(m[target.metric])]
        if o.diverged:  # the weights are garbage: an earlier evaluation is no quality of this run
            table.add_row("quality", f"none: the run diverged at step {o.steps} (a non-finite loss or evaluation; "
                                     f"target {target.describe()})")
        elif not values:
            table.add_row("quality", f"none: no evaluation ran (target {target.describe()})")
        elif together:
            last = o.evals[-1][1].get(target.metric, math.nan)
            where = "" if o.status == "success" else ", at the last evaluation"
            table.add_row("quality", f"{last:.4f} {target.metric} (target {target.describe()}{where})")
        else:
            best = (min if target.direction == "lower" else max)(values)
            table.add_row("quality", f"{best:.4f} {target.metric} (target {target.describe()}, best of the run)")
    if o.status == "success" and o.reached_samples is not None and o.reached_samples != o.samples and o.samples:
        # offline evaluation trained past the model that met the target: count to that model
        samples = o.reached_samples
        table.add_row(f"{result.unit} to target", f"{samples * o.units // o.samples:,} ({samples:,} samples, "
                                                  f"{samples * o.steps // o.samples} steps; trained on to {o.samples:,})")
    else:
        table.add_row(f"{result.unit} to target" if o.status == "success" else f"{result.unit} trained",
                      f"{o.units:,} ({o.samples:,} samples, {o.steps} steps)")
    table.add_row("throughput", f"{result.units_per_s:,.0f} {result.unit}/s (training steps, evaluation excluded)")
    if result.achieved_flops:
        peak = result.peak_flops * result.world_size
        per_process = f", {result.world_size} processes x {result.peak_flops / 1e9:,.1f}" if result.world_size > 1 else ""
        table.add_row("MFU", f"{result.mfu:.1%} ({result.achieved_flops / 1e9:,.1f} of {peak / 1e9:,.1f} GFLOP/s "
                             f"measured matmul peak{per_process})")
    table.add_row("seed", str(result.seed))
    table.add_row("MLPerf log", str(result.log_path))
    table.add_row("metrics", str(result.metrics_path))
    table.add_row("system", str(result.system_path))
    console.print(table)
    if o.profile is not None:
        print_profile(o.profile, console)


def print_profile(report: ProfileReport, console: Console) -> None:
    """The profiled steps: each region of the loop, and the operators that cost most, per step."""
    if not report.steps:
        console.print("trainclock: --profile: the run ended before any profiled step")
        return
    per_step = report.step_s
    regions = Table(title=f"where a step's time went: {report.steps} profiled steps, {per_step * 1000:,.1f} ms each "
                          f"(evaluations excluded)", title_justify="left")
    for col in ("part of the loop", "ms per step", "share"):
        regions.add_column(col, justify="left" if col == "part of the loop" else "right")
    for name in REGIONS:
        if name in report.regions and name != EVALUATION:
            seconds = report.regions[name] / report.steps
            regions.add_row(name, f"{seconds * 1000:,.2f}", f"{seconds / per_step:.1%}")
    outside = report.outside_step_s / report.steps
    regions.add_row("[bold]outside forward, backward and optimizer", f"[bold]{outside * 1000:,.2f}",
                    f"[bold]{outside / per_step:.1%}")
    console.print(regions)
    operators = Table(title="costliest operators (self CPU time)", title_justify="left")
    for col in ("operator", "ms per step", "calls per step", "share"):
        operators.add_column(col, justify="left" if col == "operator" else "right", overflow="fold")
    for name, seconds, calls in report.operators:
        operators.add_row(name, f"{seconds / report.steps * 1000:,.2f}", f"{calls / report.steps:,.0f}",
                          f"{seconds / report.steps / per_step:.1%}")
    console.print(operators)
    console.print(f"trace (chrome://tracing or ui.perfetto.dev): {report.trace}", soft_wrap=True, markup=False)
