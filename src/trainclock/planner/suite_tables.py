"""The tables of `plan --validate` for the benchmarks calibrated on the published scores."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainclock.planner.suite import OVERCOUNT_NOTE, SCORES_CSV
from trainclock.planner.suite_validation import BenchmarkReport, SuiteReport


def print_suite_validation(report: SuiteReport, console: Console) -> None:
    summary = Table(title=f"every benchmark on the published v3.1 scores ({SCORES_CSV}): leave-one-out per "
                          "benchmark, each entry fitted on the others of its accelerator", title_justify="left")
    for col in ("benchmark", "entries left out one by one", "mean error", "worst error", "same-hardware spread"):
        summary.add_column(col, justify="left" if col == "benchmark" else "right")
    for b in report.benchmarks:
        errors = b.error_summary
        summary.add_row(b.key, str(len(b.leave_one_out)), f"{errors[0]:.1%}" if errors else "-",
                        f"{errors[1]:.1%}" if errors else "-",
                        f"{b.same_hardware_spread:.1%}" if b.same_hardware_spread is not None else "-")
    summary.caption = ("same-hardware spread: how far entries on the same accelerators in the same number (other "
                       "submitters, software, hosts) are from their mean; a model of accelerator and count cannot beat it")
    console.print(summary)
    for b in report.benchmarks:
        console.print(_fits(b))
        if b.leave_one_out:
            console.print(_leave_one_out(b))
    if report.left_out:
        left = Table(title="published entries not calibrated on", title_justify="left")
        left.add_column("why")
        left.add_column("entries", justify="right")
        for why, n in report.left_out.most_common():
            left.add_row(why, str(n))
        console.print(left)


def _fits(b: BenchmarkReport) -> Table:
    table = Table(title=f"{b.key}: fit on every entry, per accelerator", title_justify="left")
    for col in ("accelerator", "entries", "matmul efficiency", "eval overhead (s)", "overhead from"):
        table.add_column(col, justify="right" if col in ("entries", "matmul efficiency", "eval overhead (s)") else "left")
    for accelerator, fit in b.fits.items():
        flag = " *" if fit.efficiency.compute > 1 else ""
        table.add_row(accelerator, str(len(fit.fitted_on)), f"{fit.efficiency.compute:.3f}{flag}",
                      f"{fit.efficiency.eval_overhead_s:.2f}", fit.overhead_source)
    if any(f.efficiency.compute > 1 for f in b.fits.values()):
        table.caption = "*" + OVERCOUNT_NOTE
    return table


def _leave_one_out(b: BenchmarkReport) -> Table:
    table = Table(title=f"{b.key}: leave-one-out", title_justify="left")
    for col in ("entry", "accelerators", "layout", "measured (min)", "predicted (min)", "error"):
        table.add_column(col, justify="left" if col in ("entry", "layout") else "right", overflow="fold")
    for r in sorted(b.leave_one_out, key=lambda r: (r.entry.accelerator.id, r.entry.row.count)):
        p = r.entry.prediction
        table.add_row(r.entry.row.key, f"{r.entry.row.count} x {r.entry.accelerator.id}",
                      f"{p.plan.short()}, gbs {p.global_batch_size:,}", f"{r.measured_min:.2f}",
                      f"{r.predicted_min:.2f}", f"{r.error:+.1%}")
    return table
