"""Time-to-train as MLPerf defines it: run_stop - run_start, read from the log."""

from __future__ import annotations

import bisect

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


def eval_spans(starts: list[Event], stops: list[Event],
               resumes: list[Event] = ()) -> list[tuple[float, int | float, int | float]] | None:
    """(progress tag, start ms, end ms) of each evaluation, in progress order; None where the
    eval_start and eval_stop events do not pair up. Several ranks may log the same evaluation:
    events are grouped by their epoch_num (else step_num) and the group's earliest start and
    latest stop kept. With `resumes` (the log's block_start and epoch_start events), an evaluation
    scored while training went on (eval_start, the next block_start, then eval_stop: NVIDIA's
    detection logs) ends where training resumed: the time it took from training, not its scoring."""
    first_start: dict = {}
    last_stop: dict = {}
    for events, keep, pick in ((starts, first_start, min), (stops, last_stop, max)):
        for e in events:
            tag = e.metadata.get("epoch_num", e.metadata.get("step_num"))
            keep[tag] = pick(keep.get(tag, e.time_ms), e.time_ms)
    if not first_start or set(first_start) != set(last_stop) or None in first_start:
        return None
    resumed = sorted(e.time_ms for e in resumes)

    def end(tag) -> int | float:
        later = bisect.bisect_right(resumed, first_start[tag])  # the first resume after the evaluation began
        return min(last_stop[tag], resumed[later]) if later < len(resumed) else last_stop[tag]

    try:
        return sorted((float(t), first_start[t], end(t)) for t in first_start)
    except (TypeError, ValueError):  # a tag that is not a number
        return None
