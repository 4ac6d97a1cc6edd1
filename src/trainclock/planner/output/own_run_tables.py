"""The table of `plan --validate` for this machine's CPU tiers against trainclock's own stored runs."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trainclock.planner.calibration.own_runs import CONFIDENCE, PARTS, MemberCheck

GOAL = 0.10  # a tier's predicted time-to-train within 10% of its measured one


def print_own_runs(checks: list[MemberCheck], machine: str, left_out: str, console: Console) -> None:
    progress = "; ".join(sorted({c.samples_source for c in checks}))
    table = Table(title=f"CPU tiers on this machine ({escape(machine)}) against trainclock's own runs in the results store: "
                        f"each run predicted by a fit on the tier's other runs, at the matmul peak it measured at its "
                        f"start, trained as far as {escape(progress)} needed", title_justify="left")
    for col in ("tier", "precision", "threads", "runs", "measured (s)", f"measured: {CONFIDENCE:.0%} interval",
                "predicted (s)", "error",
                "per run: mean |error|", "time model alone", *(f"{p} part" for p in PARTS[:3])):
        table.add_column(col, justify="left" if col in ("tier", "precision") else "right")
    inside = 0
    for c in checks:
        low, high = c.measured_interval
        inside += low <= c.predicted_s <= high
        table.add_row(c.member, c.precision, str(c.threads), str(len(c.rows)), f"{c.measured_s:.1f}",
                      f"{low:.1f}-{high:.1f}", f"{c.predicted_s:.1f}", f"{c.error:+.1%}",
                      _pct(c.mean_abs([r.error for r in c.rows])), _pct(c.mean_abs([r.timed_error for r in c.rows])),
                      *(_pct(c.mean_abs([r.part_error(p) for r in c.rows])) for p in PARTS[:3]))
    within = sum(abs(c.error) <= GOAL for c in checks)
    table.caption = (f"measured: the median of the tier's runs, and where the median of as many others could fall "
                     f"(bootstrap over its runs); predicted: the median of the outcomes the model gives each run at "
                     f"each other run's progress. {within} of {len(checks)} tiers within {GOAL:.0%}; {inside} "
                     "predicted inside the measured median's interval. Per run: mean |error| of the runs' own "
                     "predictions; the time model alone trains each as far as it did (seed-to-seed spread of the "
                     "progress to target left out); parts: steady training, evaluations, the rest of the timed "
                     "region, each against the run's own."
                     + (f" Stored runs left out: {escape(left_out)}." if left_out else ""))
    console.print(table)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
