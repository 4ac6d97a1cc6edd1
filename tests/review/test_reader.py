"""The MLLOG reader: prefixes, noise, malformed lines with file:line, streaming."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from trainclock.mllog.reader import Event, Malformed, iter_events, parse_lines, read_events


def line(key: str, time_ms=1, value=None, **metadata) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME",
                                     "key": key, "value": value, "metadata": metadata})


def test_prefixes_are_stripped_and_other_lines_ignored(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("\n".join([
        "Processing " + line("a"), "plain output", "0: " + line("b"), "[1] " + line("c"), "", "  " + line("d"),
    ]) + "\n")
    events, problems = read_events(path)
    assert [(e.key, e.lineno) for e in events] == [("a", 1), ("b", 3), ("c", 4), ("d", 6)] and not problems


def test_file_order_is_kept_whatever_the_timestamps(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text("\n".join(line(k, t) for k, t in [("a", 30), ("b", 10), ("c", 20)]))
    assert [e.time_ms for e in read_events(path)[0]] == [30, 10, 20]


@pytest.mark.parametrize("text, reason", [
    (":::MLLOG {broken", "bad JSON"),
    (":::MLLOG [1, 2]", "expected a JSON object, got list"),
    (":::MLLOG " + json.dumps({"key": "a", "value": 1, "time_ms": 1}), "missing 'metadata'"),
    (":::MLLOG " + json.dumps({"key": "a", "time_ms": 1, "metadata": {}}), "missing 'value'"),
    (line("a", time_ms="12"), "'time_ms' must be a number"),
    (line("a", time_ms=True), "'time_ms' must be a number"),
    (line("a", time_ms=10**30), "'time_ms' must be a number"),
    (":::MLLOG " + json.dumps({"key": "a", "value": 1, "time_ms": float("nan"), "metadata": {}}), "'time_ms'"),
    (line("") , "'key' must be a non-empty string"),
    (":::MLLOG " + json.dumps({"key": "a", "value": 1, "time_ms": 1, "metadata": []}), "'metadata' must be"),
    (line("a") + " trailing", "extra text after the object"),
    (":::MLLOG " + "[" * 100_000 + "]" * 100_000, "bad JSON"),
])
def test_malformed_lines_are_reported_with_file_and_line(tmp_path, text, reason):
    path = tmp_path / "log.txt"
    path.write_text(line("ok") + "\nnoise\n" + text + "\n" + line("ok") + "\n")
    events, problems = read_events(path)
    assert len(events) == 2 and len(problems) == 1
    assert problems[0].lineno == 3 and reason in problems[0].reason and str(problems[0]).startswith(f"{path}:3: ")


def test_undecodable_bytes_and_crlf_do_not_cost_the_line(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(line("a", value="x").replace('"x"', '"\xff"').encode("latin-1") + b"\r\n" + line("b").encode())
    events, problems = read_events(path)
    assert [e.key for e in events] == ["a", "b"] and events[0].value == "\ufffd" and not problems


def test_reading_streams_line_by_line():
    endless = (f"{line('tick', i)}\n" for i in itertools.count())
    first = list(itertools.islice(parse_lines(endless, Path("endless")), 3))
    assert [e.time_ms for e in first] == [0, 1, 2]


def test_a_large_log_reads_fast_enough(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text("".join(f"{i}: {line('init_start', i, rank=i)}\n" for i in range(20_000)))
    items = list(iter_events(path))
    assert len(items) == 20_000 and all(isinstance(e, Event) for e in items)
    assert not any(isinstance(e, Malformed) for e in items)
