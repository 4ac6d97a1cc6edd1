"""The tables of `plan --validate` for the benchmarks calibrated on the published scores."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainclock.planner.calibration.published_scores import OVERCOUNT_NOTE, SCORES_CSV
from trainclock.planner.validation.score_checks import EXTRAPOLATION_GAP, BenchmarkReport, SuiteReport


def print_suite_validation(report: SuiteReport, console: Console) -> None:
    summary = Table(title=f"every benchmark on the published scores ({SCORES_CSV}): leave-one-out per "
                          "benchmark, each entry fitted on the others of its accelerator", title_justify="left")
    for col in ("benchmark", "entries left out one by one", "mean error", "worst error",
                f"extrapolated >= {EXTRAPOLATION_GAP}x: entries", "mean", "worst", "same-hardware spread"):
        summary.add_column(col, justify="left" if col == "benchmark" else "right")
    for b in report.benchmarks:
        summary.add_row(b.key, str(len(b.leave_one_out)), *_mean_worst(b.error_summary), str(len(b.extrapolation)),
                        *_mean_worst(b.extrapolation_summary),
                        f"{b.same_hardware_spread:.1%}" if b.same_hardware_spread is not None else "-")
    summary.caption = ("same-hardware spread: how far entries on the same accelerators in the same number (other "
                       "submitters, software, hosts) are from their mean; a model of accelerator and count cannot "
                       f"beat it. extrapolated: per accelerator, fitted on the systems of at most 1/{EXTRAPOLATION_GAP} "
                       f"of the largest, predicting those at least {EXTRAPOLATION_GAP}x the largest fitted")
    console.print(summary)
    for b in report.benchmarks:
        console.print(_fits(b))
        if b.leave_one_out:
            console.print(_checks(b))
        if b.extrapolation:
            console.print(_checks(b, f"extrapolated >= {EXTRAPOLATION_GAP}x from the smaller systems",
                                         b.extrapolation))
    if report.left_out:
        left = Table(title="published entries not calibrated on", title_justify="left")
        left.add_column("why")
        left.add_column("entries", justify="right")
        for why, n in report.left_out.most_common():
            left.add_row(why, str(n))
        console.print(left)


def _mean_worst(errors: tuple[float, float] | None) -> tuple[str, str]:
    return (f"{errors[0]:.1%}", f"{errors[1]:.1%}") if errors else ("-", "-")


def _fits(b: BenchmarkReport) -> Table:
    table = Table(title=f"{b.key}: fit on every entry, per accelerator", title_justify="left")
    numbers = ("entries", "matmul efficiency", "fixed per step (ms)", "eval efficiency", "eval fixed (s)")
    for col in ("accelerator", *numbers, "evaluation from"):
        table.add_column(col, justify="right" if col in numbers else "left")
    for accelerator, fit in b.fits.items():
        e = fit.efficiency
        flag = " *" if e.compute > 1 else ""
        fixed = f"{e.step_overhead_s * 1e3:.2f}" if fit.step_overhead_fitted else "0 (one batch per replica)"
        table.add_row(accelerator, str(len(fit.fitted_on)), f"{e.compute:.3f}{flag}", fixed,
                      f"{e.eval_compute:.3g}" if e.eval_compute is not None else "-", f"{e.eval_overhead_s:.2f}",
                      fit.overhead_source)
    if any(f.efficiency.compute > 1 for f in b.fits.values()):
        table.caption = "*" + OVERCOUNT_NOTE
    return table


def _checks(b: BenchmarkReport, title: str = "leave-one-out", rows: list | None = None) -> Table:
    table = Table(title=f"{b.key}: {title}", title_justify="left")
    for col in ("entry", "accelerators", "layout", "layout from", "measured (min)", "predicted (min)", "error"):
        table.add_column(col, justify="left" if col in ("entry", "layout", "layout from") else "right", overflow="fold")
    for r in sorted(b.leave_one_out if rows is None else rows, key=lambda r: (r.entry.accelerator.id, r.entry.row.count)):
        p = r.entry.prediction
        table.add_row(r.entry.row.key, f"{r.entry.row.count} x {r.entry.accelerator.id}",
                      f"{p.plan.short()}, gbs {p.global_batch_size:,}", r.entry.layout_source.rsplit("/", 1)[-1],
                      f"{r.measured_min:.2f}", f"{r.predicted_min:.2f}", f"{r.error:+.1%}")
    return table
