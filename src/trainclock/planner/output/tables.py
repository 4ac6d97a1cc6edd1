"""Terminal tables of plans, scaling curves, the layout ranking and the validation report."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainclock.console import table_console

from trainclock.planner.calibration import result_files
from trainclock.planner.calibration import Calibrated
from trainclock.planner.calibration.result_files import Check
from trainclock.planner.model.hardware import THIS_CPU, Accelerator
from trainclock.planner.model.memory import RUNTIME_RESERVE
from trainclock.planner.model.predict import Prediction
from trainclock.planner.model.published_layouts import PublishedLayout, ReferenceFigure
from trainclock.planner.model.run_cost import Price, RunCost
from trainclock.planner.model.search import SearchResult
from trainclock.planner.model.sensitivity import STEP, sensitivities
from trainclock.planner.output.run_command import run_command
from trainclock.planner.output.scaling_curve import CurvePoint
from trainclock.planner.plan import LayoutChoice
from trainclock.planner.validation.result_file_checks import EXTRAPOLATE_FROM, GOAL_MEAN_ERROR, GOAL_WORST_ERROR, ValidationReport


def _pairs(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _count(n: float) -> str:
    return f"{n / 1e9:,.1f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"


def _amount(n: float) -> str:
    """A count in a progress unit: whole when it is whole (tokens), else with two decimals (epochs)."""
    return f"{int(n):,}" if float(n).is_integer() else f"{n:,.2f}"


def _rate(per_s: float) -> str:
    """Units per second: whole from 100 up (tokens/s), else three significant digits (epochs/s)."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"


def _singular(unit: str) -> str:
    return unit.removesuffix("s")


def _gb(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:,.1f} GB"


def print_plan(p: Prediction, calibrated: Calibrated, found: LayoutChoice, cost: RunCost, price: Price | None,
               top: int = 5, console: Console | None = None) -> None:
    console = table_console(console)
    work, acc, s = p.cost, p.accelerator, p.step
    unit = work.progress_unit
    nodes = -(-p.count // acc.accelerators_per_node)
    kept = ", ".join(f"{k} {v}" for k, v in calibrated.fixed.items())
    if isinstance(found, PublishedLayout):
        how = f"as the submission at this scale ran it: {found.describe_source()}"
    elif found is not None:
        how = (f"chosen by the planner, no published layout at this scale: best of {len(found.ranked):,} layouts "
               f"that fit ({found.considered:,} considered)")
    else:
        how = f"as given (--layout){f' and as the calibration runs ran ({kept})' if kept else ''}, the rest from the stack"
    command, not_run = run_command(p)
    console.print(_pairs(f"{work.name} on {p.count:,} x {acc.id}", [
        ("model", f"{_count(work.parameter_count)} parameters, {work.flops_per_sample.total / work.units_per_sample:.3e} "
                  f"training FLOPs/{_singular(unit)}"),
        ("system", f"{p.count:,} x {acc.name} in {nodes:,} node(s) of {acc.accelerators_per_node}; "
                   f"{p.plan.precision} matmul peak {acc.peak(p.plan.precision) / 1e12:,.3g} TFLOP/s"
                   + (f" ({acc.source})" if acc.id == THIS_CPU else "")),
        ("calibration", f"{calibrated.source}: matmuls at {p.efficiency.compute:.1%} of {p.plan.precision} peak, "
                        + (f"evaluation's at {p.efficiency.eval_compute:.1%}, " if p.efficiency.eval_compute else "")
                        + f"{p.efficiency.eval_overhead_s:.2f} s fixed per evaluation"
                        + (f", {p.efficiency.eval_async_s:.1f} s of its scoring beside training (asynchronous)"
                           if p.efficiency.eval_async_s else "")),
        ("layout", f"{p.plan.describe()} ({how})"),
        ("global batch", f"{p.global_batch_size:,} {work.sample_noun}; {s.micro_batches} micro-batches "
                         f"of {p.plan.micro_batch} per replica and step"),
        ("to run it", command),
        *([("", not_run)] if not_run else []),
    ]))
    console.print(_pairs("predicted time-to-train (run_start to run_stop, init excluded)", [
        ("time-to-train", f"[bold]{p.time_to_train_s / 60:,.2f} min[/bold] ({p.time_to_train_s:,.0f} s)"),
        (f"{unit} to target", f"{_amount(p.units)} ({p.samples_source})"),
        ("training", f"{p.steps:,} steps x {s.step_s:.3f} s = {p.train_s:,.1f} s"),
        ("evaluation", f"{p.evaluations} evaluations x {p.eval_s:.2f} s"
                       + (f" + {p.eval_async_exposed_s:.1f} s of the last one's scoring (the others' ran beside "
                          f"training)" if p.eval_async_exposed_s else "") + f" = {p.evals_s:,.1f} s"),
        *([("rest of the run", f"{p.run_overhead_s:+,.1f} s " + (
            "(start-up and warm-up inside the timed region)" if p.run_overhead_s > 0
            else "(the calibration runs' first interval trained faster than their steady steps)"))]
          if p.run_overhead_s else []),
        ("throughput", f"{_rate(p.units_per_s)} {unit}/s training; MFU {p.mfu:.1%} of {p.plan.precision} peak"),
        *([("[bold red]warning", "[bold red]this layout does not fit in memory (table below): it cannot run as given")]
          if not p.memory.fits else []),
    ]))
    breakdown = Table(title="one training step", title_justify="left")
    for col in ("part", "seconds", "share"):
        breakdown.add_column(col, justify="left" if col == "part" else "right")
    for label, seconds in s.rows():
        breakdown.add_row(label, f"{seconds:.4f}", f"{seconds / s.step_s:.1%}")
    breakdown.add_row("[bold]step", f"[bold]{s.step_s:.4f}", "100%")
    console.print(breakdown)
    _print_memory(p, console)
    _print_cost(p, cost, price, console)
    _print_sensitivity(p, console)
    if isinstance(found, SearchResult) and len(found.ranked) > 1 and top > 1:
        _print_ranking(found, top, console)


def print_reference(p: Prediction, figure: ReferenceFigure, smaller: Prediction | None,
                    console: Console | None = None) -> None:
    """A sanity line: the prediction beside a figure published for the same system (never fitted
    on), and the predicted scaling efficiency of the claim the figure is part of."""
    console = table_console(console)
    predicted = p.time_to_train_s / 60
    console.print(f"sanity: published {figure.minutes:g} min for this system ({figure.source}); predicted "
                  f"{predicted:,.2f} min ({predicted / figure.minutes - 1:+.1%})", soft_wrap=True)
    if smaller is not None:
        k = p.count / smaller.count
        speedup = smaller.time_to_train_s / p.time_to_train_s
        console.print(f"predicted scaling {smaller.count:,} -> {p.count:,} x {p.accelerator.id}: "
                      f"{smaller.time_to_train_s / 60:,.2f} -> {predicted:,.2f} min, {speedup:.2f}x for {k:g}x the "
                      f"accelerators, time-to-train efficiency {speedup / k:.1%} ({smaller.plan.short()}, batch "
                      f"{smaller.global_batch_size:,} at {smaller.count:,})", soft_wrap=True)


def _print_sensitivity(p: Prediction, console: Console) -> None:
    table = Table(title=f"what moves this prediction most: each assumption at -{STEP:.0%} and +{STEP:.0%}, the layout held",
                  title_justify="left")
    for col in ("assumption", f"-{STEP:.0%}", f"+{STEP:.0%}"):
        table.add_column(col, justify="left" if col == "assumption" else "right")
    for row in sensitivities(p):
        table.add_row(row.knob, f"{row.minus:+.2%}", f"{row.plus:+.2%}")
    table.caption = "change of the time-to-train; measure the top rows first"
    console.print(table)


def _print_memory(p: Prediction, console: Console) -> None:
    m = p.memory
    table = Table(title=f"memory per accelerator ({m.stage})", title_justify="left")
    table.add_column("part")
    table.add_column("GB", justify="right")
    for label, n_bytes in m.rows():
        table.add_row(label, f"{n_bytes / 1e9:,.2f}")
    table.add_row("[bold]total", f"[bold]{m.total / 1e9:,.2f}")
    if m.sharded:
        table.add_row("of which sharded over all devices", f"{m.sharded / 1e9:,.2f}")
    verdict = "[green]fits[/green]" if m.fits else "[bold red]DOES NOT FIT[/bold red]"
    table.add_row(verdict, f"of {m.usable / 1e9:,.2f} usable")
    console.print(table)
    console.print(f"usable: {_gb(m.capacity)} less {RUNTIME_RESERVE:.0%} kept for the runtime (context, fragmentation, buffers)")


def _print_cost(p: Prediction, cost: RunCost, price: Price | None, console: Console) -> None:
    rows = [("accelerator-hours", f"{cost.accelerator_hours:,.1f} per run")]
    if price is not None and cost.per_run is not None:
        rows.append(("price", f"{price.text} = {price.per_accelerator_hour:,.4g} per accelerator-hour"))
        rows.append(("cost", f"{cost.per_run:,.0f} per run; {cost.per_result:,.0f} per result "
                             f"({cost.runs_per_result} runs make an MLPerf {p.cost.benchmark} result)"))
    if cost.energy_kwh is not None:
        rows.append(("energy", f"{cost.energy_kwh:,.1f} kWh per run at {p.accelerator.power_watts:g} W rated per "
                               f"accelerator (hosts, network and cooling excluded)"))
    console.print(_pairs("cost of the timed run", rows))


def _print_ranking(found: SearchResult, top: int, console: Console) -> None:
    table = Table(title=f"fastest layouts (of {len(found.ranked):,} that fit)", title_justify="left")
    for col in ("#", "time-to-train (min)", "step (s)", "batch", "layout", "memory (GB)"):
        table.add_column(col, justify="left" if col == "layout" else "right", overflow="fold")
    for i, p in enumerate(found.ranked[:top], 1):
        table.add_row(str(i), f"{p.time_to_train_s / 60:,.2f}", f"{p.step.step_s:.3f}", f"{p.global_batch_size:,}",
                      p.plan.short(), f"{p.memory.total / 1e9:,.1f}")
    rejected = ", ".join(f"{n:,} {why}" for why, n in found.rejected.most_common())
    if rejected:
        table.caption = f"rejected: {rejected}"
    console.print(table)


def print_sweep(points: list[CurvePoint], title: str, console: Console | None = None) -> None:
    console = table_console(console)
    table = Table(title=title, title_justify="left")
    with_cost = any(p.cost_per_run is not None for p in points)
    columns = ["accel.", "nodes", "batch", "TTT (min)", "speedup", "TTT eff.", "tput eff.", "MFU", "GB",
               *(["cost/run"] if with_cost else []), "layout"]
    for col in columns:
        table.add_column(col, justify="left" if col == "layout" else "right", overflow="fold")
    for p in points:
        table.add_row(f"{p.accelerators:,}", f"{p.nodes:,}", f"{p.global_batch_size:,}", f"{p.time_to_train_min:,.2f}",
                      f"{p.speedup:.2f}x", f"{p.time_to_train_efficiency:.1%}", f"{p.throughput_efficiency:.1%}",
                      f"{p.mfu:.1%}", f"{p.memory_gb:,.1f}", *([f"{p.cost_per_run:,.0f}"] if with_cost else []), p.layout_short)
    table.caption = ("TTT: predicted time-to-train; against the first row, TTT eff. = (T(N)/T(kN))/k and tput eff. = "
                     f"training {points[0].progress_unit}/s per accelerator (evaluations excluded); GB: memory per accelerator")
    console.print(table)


def print_validation(report: ValidationReport, console: Console | None = None) -> None:
    console = table_console(console)
    fits = Table(title="calibration: per software stack", title_justify="left")
    numbers = ("entries", "matmul efficiency", "eval overhead (s)", "run overhead (s)")
    for col in ("stack", "software", *numbers, "overheads from"):
        fits.add_column(col, justify="right" if col in numbers else "left")
    for f in report.fits.values():
        fits.add_row(f.stack.id, f.stack.software, str(len(f.fitted_on)), f"{f.efficiency.compute:.3f}",
                     f"{f.efficiency.eval_overhead_s:.2f}", f"{f.efficiency.run_overhead_s:.1f}", f.overhead_source)
    console.print(fits)
    console.print(_checks("fit on every entry: each entry against the fit", report.fitted, report.unit))

    logs = Table(title="result logs against the model (fitted to times-to-train, steady step and evaluation times)",
                 title_justify="left")
    for col in ("stack", "log of", "step s: log", "model", "eval s: log", "model", "micro-batches: log", "model"):
        logs.add_column(col, justify="left" if col in ("stack", "log of") else "right", overflow="fold")
    for c in report.logs:
        logs.add_row(c.stack, c.entry, f"{c.logged_step_s:.3f}", f"{c.model_step_s:.3f}", f"{c.logged_eval_s:.2f}",
                     f"{c.model_eval_s:.2f}", str(c.logged_accumulation or "-"), str(c.model_micro_batches))
    console.print(logs)

    console.print(_checks("leave-one-out: each entry predicted by a fit on all the others", report.leave_one_out,
                          report.unit))
    console.print(_parts("leave-one-out, part by part: the mean run of each left-out entry's logs",
                         report.leave_one_out))
    if report.extrapolation:
        title = f"extrapolation: fitted on entries of <= {EXTRAPOLATE_FROM:,} accelerators only"
        console.print(_checks(title, report.extrapolation, report.unit))
        console.print(_parts("extrapolation, part by part", report.extrapolation))
    goal = Table(title=f"the goal: mean <= {GOAL_MEAN_ERROR:.0%} and worst <= {GOAL_WORST_ERROR:.0%} on entries left "
                       "out of the fit", title_justify="left")
    for col in ("test", "part", "entries", "mean error", "worst error", "verdict"):
        goal.add_column(col, justify="left" if col in ("test", "part", "verdict") else "right")
    for name, part, summary in report.goal_rows():
        if summary is None:
            goal.add_row(name, part, "0", "-", "-", "no log to check it")
            continue
        n = len(report.leave_one_out if name == "leave-one-out" else report.extrapolation)
        n = n if part == "total" else sum(r.parts is not None for r in
                                          (report.leave_one_out if name == "leave-one-out" else report.extrapolation))
        ok = summary[0] <= GOAL_MEAN_ERROR and summary[1] <= GOAL_WORST_ERROR
        goal.add_row(name, part, str(n), f"{summary[0]:.1%}", f"{summary[1]:.1%}",
                     "[green]meets[/green]" if ok else "[bold red]misses[/bold red]")
    console.print(goal)
    if report.projections:
        table = Table(title="projection beyond the table (fit on every entry)", title_justify="left")
        for col in ("stack", "accelerators", "batch", "layout", "time-to-train (min)", "step (s)", "memory (GB)"):
            table.add_column(col, justify="left" if col in ("stack", "layout") else "right", overflow="fold")
        for pr in report.projections:
            p = pr.prediction
            table.add_row(pr.stack, f"{p.count:,}", f"{p.global_batch_size:,}", f"{pr.how}: {p.plan.short()}",
                          f"{p.time_to_train_s / 60:.2f}", f"{p.step.step_s:.3f}", f"{p.memory.total / 1e9:.1f}")
        console.print(table)


def _parts(title: str, rows: list[Check]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("entry", "part", "log (s)", "model (s)", "error"):
        table.add_column(col, justify="left" if col in ("entry", "part") else "right", overflow="fold")
    for r in rows:
        if r.parts is None:
            continue
        for part in result_files.PARTS:
            measured, predicted = r.parts.measured[part], r.parts.predicted[part]
            error = f"{r.parts.error(part):+.1%}" if abs(measured) > 1e-9 else "-"
            table.add_row(r.entry.key if part == result_files.PARTS[0] else "", part, f"{measured:,.1f}",
                          f"{predicted:,.1f}", error)
    table.caption = ("training: steady steps (between evaluations) over the run's progress; rest: the timed region "
                     "outside steps and evaluations (start-up, warm-up); the model runs each log's own progress")
    return table


def _checks(title: str, rows: list[Check], unit: str) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("entry", "accelerators", "batch", "measured (min)", "predicted (min)", "error", "step-time model only"):
        table.add_column(col, justify="left" if col == "entry" else "right", overflow="fold")
    for r in rows:
        p = r.entry.published
        table.add_row(r.entry.key, f"{p.accelerators:,}", f"{p.global_batch_size:,}", f"{r.measured_min:,.2f}",
                      f"{r.predicted_min:,.2f}", f"{r.error:+.1%}", f"{r.timing_error:+.1%}")
    table.caption = (f"predicted: {unit} from the convergence model; step-time model only: with the {unit} the scored "
                     "run trained")
    return table


def print_catalogue(catalogue: dict[str, Accelerator], console: Console | None = None) -> None:
    console = table_console(console)
    table = Table(title="accelerators (add yours with --hardware FILE; this-cpu is measured when asked for)",
                  title_justify="left")
    for col in ("id", "name", "peak TFLOP/s", "memory", "per node", "intra-node GB/s", "inter-node GB/s", "power"):
        table.add_column(col, justify="left" if col in ("id", "name", "peak TFLOP/s") else "right")
    for a in catalogue.values():
        peaks = ", ".join(f"{k} {v / 1e12:g}" for k, v in a.peak_flops.items())
        table.add_row(a.id, a.name, peaks, _gb(a.memory_bytes), str(a.accelerators_per_node),
                      f"{a.intra_node_bandwidth / 1e9:g}", f"{a.inter_node_bandwidth / 1e9:g}",
                      f"{a.power_watts:g} W" if a.power_watts else "-")
    console.print(table)
