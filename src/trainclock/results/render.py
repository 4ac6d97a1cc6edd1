"""Terminal tables of the results store: import summaries, entry lists, one entry, comparisons.
Minutes are shown with 3 decimals; every column says its unit."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.markup import escape as _escape
from rich.table import Table

from trainclock.console import table_console
from trainclock.mllog.progress import PASS_UNITS
from trainclock.mllog.reader import without_surrogates
from trainclock.results.compare import Comparison, Compared
from trainclock.results.importer import NEW, UNCHANGED, UPDATED, ImportReport
from trainclock.results.models import Entry, Run
from trainclock.results.queries import EntryRow
from trainclock.results.quality import best_values, eval_values, shown_values
from trainclock.results.records import CLOUD, ONPREM
from trainclock.review.benchmarks import describe, metrics_from_json
from trainclock.review.render import SUMMARIZER_NOTE, summarizer_column

VERDICT_STYLE = {"valid": "green", "incomplete": "yellow"}


def escape(text: str) -> str:
    """Rich markup escaped, and lone surrogates (a file name that is not UTF-8) replaced: no terminal can print them."""
    return _escape(without_surrogates(text))

WHERE = {CLOUD: "cloud", ONPREM: "on-prem"}
FINDINGS_SHOWN = 4  # per run, unless verbose
SYSTEM_FIELDS_SHOWN = ("submitter", "status", "number_of_nodes", "accelerators_per_node", "accelerator_model_name",
                       "accelerator_memory_capacity", "accelerator_interconnect", "host_processor_model_name",
                       "host_networking", "framework")


def print_import(report: ImportReport, console: Console | None = None) -> None:
    console = table_console(console)
    for outcome in report.outcomes:
        for note in outcome.notes:
            console.print(f"[yellow]note[/]: {escape(note)}")
    for reason in report.skipped:
        console.print(f"[yellow]skipped[/]: {escape(reason)}")
    megabytes = report.log_bytes / 1e6
    seconds = report.review_seconds + report.store_seconds
    console.print(
        f"imported {len(report.outcomes)} entries ({report.count(NEW)} new, {report.count(UPDATED)} updated, "
        f"{report.count(UNCHANGED)} unchanged) and {report.logs} logs ({report.runs_added} new runs, "
        f"{report.runs_present} already stored; {megabytes:.1f} MB) into {escape(report.url)} in {seconds:.2f} s "
        f"(review {report.review_seconds:.2f} s, store {report.store_seconds:.2f} s)")


def print_entries(rows: Sequence[EntryRow], console: Console | None = None) -> None:
    console = table_console(console)
    if not rows:
        console.print("no stored entry matches; import results with `trainclock results import PATH`")
        return
    table = _table("Stored results: score = official time-to-train in minutes")
    for column in ("id", "round", "org", "system", "benchmark", "div.", "where", "accelerators", "runs",
                   "score (min)", "summarizer", "verdict"):
        _column(table, column)
    for row in rows:
        runs = f"{row.runs}/{row.runs_required}" if row.runs_required else str(row.runs)
        table.add_row(f"#{row.id}", row.round, escape(row.org or "?"), escape(row.system or "?"), escape(row.benchmark),
                      escape(row.division or "?"), WHERE.get(row.availability, "?"), _accelerators(row), runs,
                      _minutes(row.score_minutes), summarizer_column(row.score_minutes, row.summarizer_minutes, 3),
                      _verdict(row.verdict))
    console.print(table)
    if any(row.summarizer_minutes != row.score_minutes for row in rows):
        console.print(SUMMARIZER_NOTE)


def print_entry(entry: Entry, console: Console | None = None, verbose: bool = False) -> None:
    console = table_console(console)
    system = entry.system_row
    accelerators = "?" if system is None or system.accelerators is None else (
        "none (CPU)" if system.accelerators == 0 else f"{system.accelerators:,} × {system.accelerator_model or '?'}")
    console.print(f"[bold]#{entry.id} {escape(entry.org or '?')} / {escape(entry.system or '?')} / "
                  f"{escape(entry.benchmark)}[/] (MLPerf Training v{escape(entry.round)} rules, {escape(entry.division or '?')} division)")
    # an entry without runs (left by an older trainclock) has nothing to back its stored score
    score, verdict = (entry.score_minutes, entry.verdict) if entry.runs else (None, "incomplete")
    summarizer = entry.summarizer_minutes if entry.runs else None
    console.print(f"  score: {_minutes(score)} min, {_verdict(verdict)}; the official summarizer prints "
                  f"{'the same' if summarizer == score else _minutes(summarizer) + ' min'}; "
                  f"RCP {entry.rcp_status or 'n/a'}; availability {WHERE.get(entry.availability, '?')} "
                  f"({escape(entry.status or 'not stated')})")
    console.print(f"  accelerators: {escape(accelerators)}; logs from {escape(entry.folder)}")
    for reason in entry.reasons:
        console.print(f"  {escape(reason)}")
    if system is not None:
        shown = system.fields if verbose else {k: system.fields.get(k) for k in SYSTEM_FIELDS_SHOWN}
        console.print("  system: " + "; ".join(f"{k} {escape(str(v))}" for k, v in shown.items() if v not in (None, "")))
    metrics = metrics_from_json(entry.metrics)
    if metrics:
        console.print(f"  quality: {escape(describe(metrics))}")
    table = _table("Runs: time-to-train = run_stop - run_start")
    unit = entry.progress_unit or next((r.progress_unit for r in entry.runs if r.progress_unit), None) or "progress"
    for column in ("run", "status", "review", "minutes", f"{unit} to target", "best quality", "evals", "errors",
                   "warnings"):
        _column(table, column)
    for run in entry.runs:
        table.add_row(escape(run.file_name), escape(run.status), "[green]pass[/]" if run.passed else "[red]fail[/]",
                      _minutes(run.minutes), _count(run.units_to_converge), escape(_run_best(run)),
                      str(len(run.evals)), str(run.errors), str(run.warnings))
    console.print(table)
    for run in entry.runs:
        _print_run_details(run, console, verbose)


def print_comparisons(comparisons: Sequence[Comparison], console: Console | None = None) -> None:
    console = table_console(console)
    for comparison in comparisons:
        # epochs and steps are no amount of data: their throughput would be in samples, where known
        fallback = comparison.progress_unit if comparison.progress_unit not in (None, *PASS_UNITS) else "samples"
        unit = next((row.unit for row in comparison.rows if row.unit), fallback)
        base = comparison.baseline
        title = f"{comparison.benchmark}: score = official time-to-train in minutes" + (
            f"; speedup over #{base.entry.id} {base.entry.system}" if base else "") + (
            f"; quality: {describe(comparison.metrics)}" if comparison.metrics else "")
        table = _table(escape(title))
        best_columns = [f"best {m.shown} ({'max' if m.direction == 'higher' else 'min'})" for m in comparison.metrics]
        for column in ("id", "round", "org", "system", "where", "accelerators", "runs", "score (min)", "speedup",
                       f"{unit}/s", f"{unit}/s per accel.", *best_columns, "verdict"):
            _column(table, column)
        for row in comparison.rows:
            e = row.entry
            best = [_quality(row.best.get(m.name)) for m in comparison.metrics]
            table.add_row(f"#{e.id}", e.round, escape(e.org or "?"), escape(e.system or "?"),
                          WHERE.get(e.availability, "?"), _accelerators(e), f"{e.passed_runs}/{e.runs} passed",
                          _minutes(e.score_minutes), "—" if row.speedup is None else f"{row.speedup:.2f}×",
                          _count(row.throughput), _count(row.per_accelerator), *best, _verdict(e.verdict))
        console.print(table)
        if comparison.scaling:
            _print_scaling(comparison, unit, console)
        console.print()


def _print_scaling(comparison: Comparison, unit: str, console: Console) -> None:
    table = _table(escape(f"{comparison.benchmark} scaling efficiency N → kN: time-to-train (T(N)/T(kN))/k, "
                          f"throughput ({unit}/s(kN) / {unit}/s(N))/k"))
    for column in ("family", "N", "kN", "k", "T(N) min", "T(kN) min", "time-to-train eff.", "throughput eff."):
        _column(table, column)
    for s in comparison.scaling:
        table.add_row(escape(s.family), _system_size(s.small), _system_size(s.large), f"{s.k:.2f}",
                      _minutes(s.small.entry.score_minutes), _minutes(s.large.entry.score_minutes),
                      f"{s.time_efficiency:.1%}",
                      "—" if s.throughput_efficiency is None else f"{s.throughput_efficiency:.1%}")
    console.print(table)


def _print_run_details(run: Run, console: Console, verbose: bool) -> None:
    shown = run.findings if verbose else [f for f in run.findings if f.severity == "error"]
    curve = [p for p in run.evals if p.progress is not None]
    if not (shown or verbose):
        return
    console.print(f"\n  [bold]{escape(run.file_name)}[/] ({escape(run.path)}), sha256 {run.sha256[:12]}…")
    for finding in shown[: None if verbose else FINDINGS_SHOWN]:
        style = "yellow" if finding.severity == "warning" else "red"
        where = f"line {finding.lineno}: " if finding.lineno else ""
        about = f"{finding.key}: " if finding.key else ""
        console.print(f"    [{style}]{where}{escape(about + finding.message)}[/] [{escape(finding.rule)}]")
    if len(shown) > FINDINGS_SHOWN and not verbose:
        console.print(f"    … and {len(shown) - FINDINGS_SHOWN} more (--verbose shows all)")
    if verbose and curve:
        points = ", ".join(f"{_count(p.progress)}: {p.value:.4g}" if p.value is not None else
                           f"{_count(p.progress)}: {escape(str(p.value_json))}" for p in curve)
        console.print(f"    eval curve ({run.progress_unit or 'progress'}: value): {points}")


def _run_best(run: Run) -> str:
    """The best value the run reached of each of its metrics, in each one's direction."""
    metrics = metrics_from_json(run.metrics)
    points = [eval_values(p.value, p.value_json, p.metric, metrics) for p in run.evals]
    return shown_values(best_values(points, metrics), metrics)


def _quality(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _table(title: str) -> Table:
    return Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), show_edge=False)


def _column(table: Table, name: str) -> None:
    names = name in ("org", "system", "benchmark", "family", "run", "accelerators", "best quality")
    # a narrow terminal folds the names onto more lines and never cuts a number short
    table.add_column(name, justify="left" if names or name in ("verdict", "where", "status", "review") else "right",
                     overflow="fold", no_wrap=not names)


def _accelerators(row: EntryRow) -> str:
    if row.accelerators is None:
        return "?"
    if row.accelerators == 0:
        return "CPU"
    return escape(f"{row.accelerators:,} × {row.accelerator_model or '?'}")


def _system_size(row: Compared) -> str:
    return f"{row.entry.accelerators:,} (#{row.entry.id})"


def _minutes(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _count(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"  # small rates keep 3 significant digits


def _verdict(verdict: str) -> str:
    return f"[{VERDICT_STYLE.get(verdict, 'red')}]{escape(verdict)}[/]"
