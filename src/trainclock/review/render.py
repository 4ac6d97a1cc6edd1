"""The terminal view of a review: one table row per entry, then what failed and why."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.markup import escape as _escape
from rich.table import Table

from trainclock.console import table_console
from trainclock.mllog.reader import without_surrogates
from trainclock.review.entry import INCOMPLETE, VALID, EntryReview
from trainclock.review.run_review import RunReview

VERDICT_STYLE = {VALID: "green", INCOMPLETE: "yellow"}
SUMMARIZER_NOTE = ("summarizer: the score the official result summarizer prints, \"=\" where it is trainclock's; "
                   "trainclock withholds the score of an entry whose RCP check failed without a scaling.json "
                   "(the review committee's ruling), which the summarizer prints all the same")
FINDINGS_SHOWN = 4  # per run, unless verbose: a broken log can fail the same rule thousands of times


def escape(text: str) -> str:
    """Rich markup escaped, and lone surrogates (a file name that is not UTF-8) replaced: no terminal can print them."""
    return _escape(without_surrogates(text))


def print_review(entries: Sequence[EntryReview], console: Console | None = None, verbose: bool = False) -> None:
    console = table_console(console)
    table = Table(title="MLPerf review: time-to-train in minutes (run_stop - run_start)", box=box.SIMPLE_HEAD,
                  padding=0, show_edge=False)
    for column in ("round", "org", "system", "benchmark", "accel.", "runs", "per run", "score", "summarizer",
                   "scaling", "RCP", "verdict"):
        names = column in ("org", "system", "benchmark")
        # a narrow terminal folds the names onto more lines and never cuts a number or verdict short
        table.add_column(column, justify="left" if names or column in ("RCP", "verdict") else "right",
                         overflow="fold", no_wrap=not names, min_width=5 if names else len(column))
    for entry in entries:
        table.add_row(*_row(entry))
    console.print(table)
    if any(e.summarizer_score != e.score_minutes for e in entries):
        console.print(SUMMARIZER_NOTE)
    if any(e.context.round_source == "default" for e in entries):
        console.print("* round assumed from the logs (their benchmark and run_start date): no vX.Y folder in "
                      "the path; choose one with --round")
    for entry in entries:
        _print_details(entry, console, verbose)


def _row(entry: EntryReview) -> list[str]:
    c = entry.context
    accelerators = entry.accelerators
    runs = f"{len(entry.runs)}/{entry.rule.runs}" if entry.rule else str(len(entry.runs))
    return [
        c.round + ("*" if c.round_source == "default" else ""),
        escape(entry.org or "?"),
        escape(entry.system or "?"),
        escape(entry.name),
        "?" if accelerators is None else "CPU" if accelerators == 0 else f"{accelerators:,}",
        runs,
        "\n".join(_minutes(run) for run in entry.runs),
        "—" if entry.score_minutes is None else f"{entry.score_minutes:.6f}",
        summarizer_column(entry.score_minutes, entry.summarizer_score, decimals=6),
        "—" if entry.scaling_path is None else f"{entry.scaling_factor:.6g}",
        _rcp(entry),
        f"[{VERDICT_STYLE.get(entry.verdict, 'red')}]{entry.verdict}[/]",
    ]


def summarizer_column(score: float | None, summarizer: float | None, decimals: int) -> str:
    """The official summarizer's score beside trainclock's: "=" where they are the same, its figure
    (or "—" for none) where trainclock's differs, e.g. a score withheld on a failed RCP check."""
    if summarizer == score:
        return "="
    return "—" if summarizer is None else f"[yellow]{summarizer:.{decimals}f}[/]"


def _rcp(entry: EntryReview) -> str:
    if entry.rcp is None:
        return "n/a"
    hint = "" if entry.rcp.binding or entry.rcp.status in ("pass", "n/a") else "?"  # too few runs to bind
    return {"fail": "[red]fail[/]", "pass": "[green]pass[/]"}.get(entry.rcp.status, entry.rcp.status) + hint


def _minutes(run: RunReview) -> str:
    shown = "—" if run.minutes is None else f"{run.minutes:.6f}"
    return shown if run.passed else f"[red]✗{shown}[/]"


def _print_details(entry: EntryReview, console: Console, verbose: bool) -> None:
    # soft_wrap: a path:line or a rule's text is never broken by an inserted newline, so it can be searched for
    c = entry.context
    console.print(f"\n[bold]{escape(' / '.join(x for x in (entry.org, entry.system, entry.name) if x))}[/] "
                  f"({escape(str(c.folder))}): {entry.verdict}", soft_wrap=True)
    for line in summarizer_lines(entry):
        console.print(f"  {escape(line)}", soft_wrap=True)
    for reason in entry.reasons:
        console.print(f"  {escape(reason)}", soft_wrap=True)
    if verbose and entry.rcp:
        console.print(f"  RCP {entry.rcp.status}: {escape(entry.rcp.message)}", soft_wrap=True)
    if entry.rule is None and entry.rules_missing and not verbose:
        return  # the one line why it is not scored says it all; its runs were checked by no round's rules
    for run in entry.runs:
        if verbose:
            reached = "not reached" if run.converged_at is None else f"{run.converged_at:,} {run.progress_unit or ''}"
            console.print(f"  {escape(run.path.name)}: {escape(run.status)}, target {escape(reached)}, "
                          f"{len(run.evals)} evaluations",
                          soft_wrap=True)
        shown = run.findings if verbose else run.errors
        for finding in shown[: None if verbose else FINDINGS_SHOWN]:
            where = f"{run.path}:{finding.lineno}" if finding.lineno else str(run.path)
            style = "yellow" if finding.severity == "warning" else "red"
            console.print(f"    [{style}]{escape(where)}[/]: {escape(finding.text)}", soft_wrap=True)
        if len(shown) > FINDINGS_SHOWN and not verbose:
            console.print(f"    … and {len(shown) - FINDINGS_SHOWN} more (--verbose shows all)", soft_wrap=True)


def summarizer_lines(entry: EntryReview) -> list[str]:
    """What the official result summarizer would print for the entry, in words: its score and how
    it came about, the runs it averages and drops, its RCP column and the lines it prints."""
    view = entry.summarizer
    if view is None:
        return ["summarizer: no scoring rules for this benchmark"]
    if view.score is None:
        score = "no score"
    else:
        scaling = f"scaling.json {view.scaling_factor:g}" if entry.scaling_path else "no scaling.json"
        score = f"{view.score:.6f} = olympic mean {view.olympic_mean:.6f} x {view.scaling_factor:g} ({scaling})"
    lines = [f"summarizer: {score}; {len(view.used)} of {len(entry.runs)} runs averaged"]
    dropped = [f"{label}: {_names(names)}" for label, names in (("fastest", view.dropped_fastest),
                                                                ("slowest", view.dropped_slowest)) if names]
    if dropped:
        lines.append("  dropped " + "; ".join(dropped))
    # which runs, with file:line, is in the entry's reasons printed below
    lines.append(f"  not converged: {len(view.not_converged)} ({view.not_converged_allowed} allowed)")
    if view.energy is not None:
        energy = view.energy
        lines.append(f"  energy: not computed: {energy.problem}" if energy.joules is None else
                     f"  energy: {energy.joules:,.1f} J, mean of the {energy.runs} runs averaged")
    rcp = entry.rcp
    if rcp is not None and rcp.official is not None:
        lines.append(f"  RCP: {rcp.official} ({rcp.official_message})"
                     + (f", batch size {rcp.batch_size}" if rcp.batch_size else ""))
    lines += [f"  {line}" for line in view.lines]
    return lines


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(n.removesuffix(".txt") for n in names)
