"""Reads `:::MLLOG` lines from any MLPerf log, streaming, so a file of any size costs one line of
memory at a time. Whatever comes before the marker on a line is a prefix to strip (`Processing `,
`0: `, `[1] `); lines without the marker are ignored; a malformed line (bad JSON, a missing or
mistyped field) is reported with file:line and never stops the reading. Events come in file
order, which is not time order: callers must not assume sorted timestamps. Only regular files are
read (a FIFO or device named result_0.txt would block or never end), and a lone surrogate escape
(`\\ud800`), which no encoder can write, becomes U+FFFD.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = ":::MLLOG"
_MARKER_BYTES = MARKER.encode()
_TIME_LIMIT = 2.0**63
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # in JSON text: an escape that may leave a lone surrogate
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Event:
    key: str
    value: Any
    time_ms: int | float  # as logged: an integer in every known log, a float is kept exact
    event_type: str  # POINT_IN_TIME, INTERVAL_START or INTERVAL_END ("" when the line has none)
    metadata: dict
    lineno: int  # 1-based line number in the file, counting every line


@dataclass(frozen=True, slots=True)
class Malformed:
    path: Path
    lineno: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.reason}"


def read_events(path: Path) -> tuple[list[Event], list[Malformed]]:
    """All events and all malformed lines of a log. Raises OSError if the file cannot be read."""
    events, problems = [], []
    for item in iter_events(path):
        (problems if isinstance(item, Malformed) else events).append(item)
    return events, problems


def iter_events(path: Path) -> Iterator[Event | Malformed]:
    """The events of a log file one at a time. Raises OSError if the file cannot be read or is
    not a regular file."""
    # Binary lines: only "\n" ends a line (as editors and `wc -l` count), and lines without
    # the marker, most of a chatty log, are skipped without being decoded.
    with open_regular(path) as f:
        yield from parse_lines(f, Path(path))


class LogSource:
    """The events of a log file, read again from the start each time it is iterated: for callers
    that need several passes over a log without holding it in memory."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __iter__(self) -> Iterator[Event | Malformed]:
        return iter_events(self.path)


def open_regular(path: Path):
    """`path` opened for binary reading, if it is a regular file; OSError otherwise. Opened
    without blocking first, so that a FIFO is refused instead of waiting for a writer forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def without_surrogates(value: Any) -> Any:
    """`value` (parsed JSON) with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    return value


def parse_lines(lines: Iterable[bytes | str], source: Path) -> Iterator[Event | Malformed]:
    """Events from lines (bytes or str) that came from `source`, numbered from 1."""
    for lineno, line in enumerate(lines, 1):
        marker = _MARKER_BYTES if isinstance(line, bytes) else MARKER
        at = line.find(marker)
        if at >= 0:
            yield _parse_record(line[at + len(MARKER):], source, lineno)


def _parse_record(text: bytes | str, source: Path, lineno: int) -> Event | Malformed:
    if isinstance(text, bytes):
        # a stray non-UTF-8 byte should not cost the whole line
        text = text.decode("utf-8", errors="replace")
    try:
        # raw_decode skips json.loads' encoding sniffing, a third of the reading time
        record, end = _DECODER.raw_decode(text, _skip_space(text, 0))
    except (ValueError, RecursionError) as e:  # RecursionError: absurdly nested JSON
        return Malformed(source, lineno, f"malformed MLLOG line: bad JSON ({_first_line(e)})")
    if _skip_space(text, end) != len(text):
        return Malformed(source, lineno, "malformed MLLOG line: bad JSON (extra text after the object)")
    if _SURROGATE_ESCAPE.search(text):  # rare: the walk is paid only where an escape could leave one
        record = without_surrogates(record)
    try:
        event = Event(record["key"], record["value"], record["time_ms"], record.get("event_type") or "",
                      record["metadata"], lineno)
    except (TypeError, KeyError, AttributeError):  # not an object, or a field missing
        event = None
    problem = _event_problem(event, record)
    return Malformed(source, lineno, f"malformed MLLOG line: {problem}") if problem else event


def _event_problem(event: Event | None, record: Any) -> str | None:
    if event is None:
        if not isinstance(record, dict):
            return f"expected a JSON object, got {type(record).__name__}"
        missing = [f for f in ("key", "value", "time_ms", "metadata") if f not in record]
        return f"missing {missing[0]!r}" if missing else "unreadable record"
    if type(event.key) is not str or not event.key:
        return "'key' must be a non-empty string"
    time_ms = event.time_ms
    # the official writer logs milliseconds as a 64-bit integer; beyond that no arithmetic is safe
    if type(time_ms) not in (int, float) or not abs(time_ms) < _TIME_LIMIT:
        return f"'time_ms' must be a number of milliseconds below 2**63, got {str(time_ms)[:40]}"
    if type(event.metadata) is not dict:
        return "'metadata' must be a JSON object"
    if type(event.event_type) is not str:
        return "'event_type' must be a string"
    return None


def _skip_space(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:120] if str(error) else type(error).__name__
