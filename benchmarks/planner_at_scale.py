"""The planner at scale: how well it predicts systems larger than those it was fitted on, using
only the published data in shared/ (fit on the small systems, predict those at least 4x larger),
leave-one-out per benchmark, and the projection to NVIDIA Eos's 10,752 H100 beside the seeds'
figure. Each benchmark's entries are planned twice: with the batch and layout NVIDIA's
configuration files give for that scale, or the submitter's own where NVIDIA ran no such scale
(planner/model/published_layouts.toml) and, for comparison,
with the layout and batch the search picks, as before those files were read.

  python benchmarks/planner_at_scale.py [--benchmark KEY] [--gap 4]

Goals (issue 38): GPT-3 extrapolation within 3% mean and 6% worst (total and training part); every
other benchmark's extrapolation within 10% mean; leave-one-out within 10% mean everywhere.
"""

from __future__ import annotations

import argparse
import statistics

from rich.console import Console
from rich.table import Table

from trainclock.planner.calibration import result_files
from trainclock.planner.calibration import published_scores
from trainclock.planner.calibration.mlperf_data import results_dir
from trainclock.planner.model.hardware import load_catalogue
from trainclock.planner.model.published_layouts import reference_figure
from trainclock.planner.validation.result_file_checks import EXTRAPOLATE_FROM, validate

PROJECTED = ("gpt3", "h100-sxm", 10752)


def _summary(errors: list[float]) -> str:
    """Mean / worst of absolute errors (fractions), and how many."""
    return f"{statistics.fmean(errors):.1%} / {max(errors):.1%} ({len(errors)})" if errors else "-"


def gpt3_tables(console: Console, gap: int) -> None:
    data = result_files.load_calibration_data(results_dir(), load_catalogue([]))
    report = validate(data)
    table = Table(title=f"GPT-3: fitted on entries of <= {EXTRAPOLATE_FROM:,} accelerators, predicting the larger ones",
                  title_justify="left")
    for col in ("entry", "accelerators", "gap", "measured (min)", "predicted (min)", "error", "training part"):
        table.add_column(col, justify="left" if col == "entry" else "right")
    for r in report.extrapolation:
        n = r.entry.published.accelerators
        training = f"{r.parts.error('training'):+.1%}" if r.parts else "-"
        table.add_row(r.entry.key, f"{n:,}", f"{n / EXTRAPOLATE_FROM:.1f}x", f"{r.measured_min:.2f}",
                      f"{r.predicted_min:.2f}", f"{r.error:+.1%}", training)
    console.print(table)
    wide = [abs(r.error) for r in report.extrapolation if r.entry.published.accelerators >= gap * EXTRAPOLATE_FROM]
    console.print(f"GPT-3 extrapolation, total: mean/worst {_summary([abs(r.error) for r in report.extrapolation])}; "
                  f"at >= {gap}x: {_summary(wide)}; training part: "
                  f"{_summary([abs(r.parts.error('training')) for r in report.extrapolation if r.parts])}")
    console.print(f"GPT-3 leave-one-out, total: mean/worst {_summary([abs(r.error) for r in report.leave_one_out])}")
    for pr in report.projections:
        p = pr.prediction
        figure = reference_figure(*PROJECTED)
        beside = (f"; published {figure.minutes:g} min, {p.time_to_train_s / 60 / figure.minutes - 1:+.1%}"
                  if figure and p.count == figure.count else "")
        console.print(f"projection {p.count:,} x {p.accelerator.id} ({pr.how}, {p.plan.short()}, batch "
                      f"{p.global_batch_size:,}): {p.time_to_train_s / 60:.2f} min{beside}")


def suite_tables(console: Console, only: str | None, gap: int) -> None:
    folder, catalogue = published_scores.suite_dir(), load_catalogue([])
    runs = {label: published_scores.load_suite(folder, catalogue, results_dir, only=only, published_layouts=flag)
            for label, flag in (("searched", False), ("as published", True))}
    table = Table(title=f"every other benchmark: leave-one-out and extrapolation (fit <= 1/{gap} of the largest "
                        f"count, predict >= {gap}x the largest fitted), mean / worst (entries)", title_justify="left")
    for col in ("benchmark", "layouts", "leave-one-out", f"extrapolation >= {gap}x"):
        table.add_column(col, justify="left" if col in ("benchmark", "layouts") else "right")
    detail = Table(title="extrapolation rows (layouts as published)", title_justify="left")
    for col in ("benchmark", "entry", "accelerators", "fitted up to", "layout from", "measured", "predicted", "error"):
        detail.add_column(col, justify="left" if col in ("benchmark", "entry", "layout from") else "right",
                          overflow="fold")
    for key in sorted(runs["as published"].benchmarks):
        for label, data in runs.items():
            bench = data.benchmarks[key]
            loo = [abs(r.error) for r in published_scores.leave_one_out(bench)]
            extrapolated = published_scores.extrapolation(bench, gap)
            table.add_row(key, label, _summary(loo), _summary([abs(r.error) for r in extrapolated]))
            if label == "as published":
                for r in extrapolated:
                    fitted = max(bench.groups[r.entry.accelerator.id], key=lambda e: e.row.count
                                 if e.row.key in r.fit.fitted_on else 0).row.count
                    detail.add_row(key, r.entry.row.key, f"{r.entry.row.count} x {r.entry.accelerator.id}",
                                   str(fitted), r.entry.layout_source.rsplit("/", 1)[-1], f"{r.measured_min:.2f}",
                                   f"{r.predicted_min:.2f}", f"{r.error:+.1%}")
    console.print(table)
    console.print(detail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", help="one MLPerf key (default: all); gpt3 prints only the GPT-3 tables")
    parser.add_argument("--gap", type=int, default=4, help="scale gap of the extrapolation (default: %(default)s)")
    args = parser.parse_args()
    console = Console(width=160)
    if args.benchmark in (None, PROJECTED[0]):
        gpt3_tables(console, args.gap)
    if args.benchmark != PROJECTED[0]:
        suite_tables(console, args.benchmark, args.gap)


if __name__ == "__main__":
    main()
