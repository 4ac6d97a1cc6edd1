"""Time-to-train as MLPerf defines it: run_stop - run_start, read from the log."""

from __future__ import annotations

from trainclock.mllog.reader import Event


class NoTimeToTrain(ValueError):
    pass


def time_to_train_ms(events: list[Event]) -> int:
    starts = [e.time_ms for e in events if e.key == "run_start"]
    stops = [e.time_ms for e in events if e.key == "run_stop"]
    if len(starts) != 1 or len(stops) != 1:
        raise NoTimeToTrain(f"expected one run_start and one run_stop, found {len(starts)} and {len(stops)}")
    return stops[0] - starts[0]


def run_status(events: list[Event]) -> str:
    stops = [e for e in events if e.key == "run_stop"]
    return str(stops[-1].metadata.get("status", "unknown")) if stops else "unfinished"
