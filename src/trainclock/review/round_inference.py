"""The round of logs that neither a vX.Y folder nor --round names: trainclock's own runs follow one
round's rules; an official log's benchmark narrows the rounds, and its run_start date picks the
one whose results it was made for. What cannot be told is one clear error, never a guess."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime
from pathlib import Path

from trainclock.errors import UsageError
from trainclock.mllog.reader import Event, iter_events
from trainclock.review.rounds import all_rounds, published, unnamed_own_round

OWN_KEY = "trainclock_workload"  # a header key only trainclock's runs log
ROUND_KEY = "trainclock_round"  # the round whose rules the run's benchmark follows (its workload's mlperf_round)
HEADER_LINES = 20_000  # a header is read up to run_start; past this many lines no header is coming


def infer_round(folder: Path, logs: list[Path]) -> str:
    """The round of an entry's logs, from the first log's header; UsageError where it cannot be told."""
    if not logs:
        raise UsageError(f"cannot tell the round of {folder}: no result logs; pass --round")
    header, started = _header(logs[0])
    if OWN_KEY in header or not header:  # no event at all: the review that follows says the log is empty
        return _own_round(folder, header.get(ROUND_KEY, unnamed_own_round()))
    benchmark = header.get("submission_benchmark")
    fits = [r.name for r in all_rounds().values() if benchmark in r.benchmarks]
    advice = "pass --round, or keep the logs under a vX.Y folder"
    if not fits:
        shown = repr(benchmark) if isinstance(benchmark, str) else "no submission_benchmark"
        raise UsageError(f"cannot tell the round of {folder}: its logs name {shown}, which no round "
                         f"{', '.join(all_rounds())} has; {advice}")
    if len(fits) == 1:
        return fits[0]
    by_date = _round_on(started, fits)
    if by_date is None:
        when = started.isoformat() if started else "no run_start"
        raise UsageError(f"cannot tell the round of {folder}: {benchmark} is in rounds {', '.join(fits)} and its "
                         f"run_start ({when}) places it in none of them alone; {advice}")
    return by_date


def _own_round(folder: Path, named: object) -> str:
    """The round a trainclock log names, when the review has its rules."""
    if not isinstance(named, str) or named not in all_rounds():
        raise UsageError(f"cannot tell the round of {folder}: its logs name round {named!r}, which the review has no "
                         f"rules for (it knows {', '.join(all_rounds())}); pass --round")
    return named


def _round_on(day: date | None, fits: list[str]) -> str | None:
    """The round among `fits` whose results were the first published on or after `day`; past the
    last published round, the one unpublished round among them, if only one."""
    if day is None:
        return None
    days = published()
    after = [name for name, published_on in days.items() if published_on >= day]
    if after:
        first = min(after, key=days.__getitem__)
        return first if first in fits else None
    unpublished = [name for name in fits if name not in days]
    return unpublished[0] if len(unpublished) == 1 else None


def _header(log: Path) -> tuple[dict, date | None]:
    """The first value of each key before run_start, and run_start's day (UTC)."""
    header: dict = {}
    try:
        events = iter_events(log)
        try:
            for event in itertools.islice(events, HEADER_LINES):
                if not isinstance(event, Event):
                    continue
                if event.key == "run_start":
                    return header, _day(event.time_ms)
                header.setdefault(event.key, event.value)
        finally:
            events.close()
    except OSError:
        pass  # unreadable: the review says why, after the round is told or refused
    return header, None


def _day(time_ms: object) -> date | None:
    if not isinstance(time_ms, int | float) or isinstance(time_ms, bool):
        return None
    try:
        return datetime.fromtimestamp(time_ms / 1000, UTC).date()
    except (OverflowError, OSError, ValueError):
        return None
