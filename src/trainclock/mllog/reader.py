"""Reads `:::MLLOG` lines from any MLPerf log: prefixes before the marker are stripped
(`Processing `, `0: `, `[1] `), other lines ignored, malformed lines reported with file:line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = ":::MLLOG"


@dataclass(frozen=True)
class Event:
    key: str
    value: Any
    time_ms: int
    event_type: str
    metadata: dict
    lineno: int


@dataclass(frozen=True)
class Malformed:
    path: Path
    lineno: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.reason}"


def read_events(path: Path) -> tuple[list[Event], list[Malformed]]:
    events, problems = [], []
    for item in iter_events(path):
        (problems if isinstance(item, Malformed) else events).append(item)
    return events, problems


def iter_events(path: Path) -> Iterator[Event | Malformed]:
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            at = line.find(MARKER)
            if at < 0:
                continue
            try:
                record = json.loads(line[at + len(MARKER):])
                metadata = record.get("metadata")
                if not isinstance(metadata, dict):
                    raise ValueError("missing metadata")
                yield Event(str(record["key"]), record.get("value"), int(record["time_ms"]),
                            str(record.get("event_type", "")), metadata, lineno)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                yield Malformed(path, lineno, f"malformed MLLOG line ({e})")
