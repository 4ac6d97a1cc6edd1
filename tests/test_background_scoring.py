"""BackgroundScoring on one process: a pending score is taken only once computed (or waited for),
one at a time, and a scoring error reaches the loop as the error it was."""

from __future__ import annotations

import threading

import pytest

from trainclock.distributed.context import single_process
from trainclock.train.scoring import BackgroundScoring, EvalPoint
from trainclock.workload.base import EvalSchedule, EvalShard

POINT = EvalPoint(step=15, samples=1024, count=0.25)


def test_a_score_is_taken_once_it_is_computed_and_only_once():
    release = threading.Event()
    scoring = BackgroundScoring(single_process())
    try:
        scoring.submit(lambda shard: (release.wait(5), {"acc": float(len(shard.gathered))})[1],
                       EvalShard(gathered=[1, 2, 3]), POINT)
        assert scoring.pending and scoring.take(wait=False) is None  # still being computed: training goes on
        with pytest.raises(RuntimeError, match="take the pending"):
            scoring.submit(lambda shard: {}, EvalShard(), POINT)
        release.set()
        assert scoring.take(wait=True) == (POINT, {"acc": 3.0})
        assert not scoring.pending and scoring.take(wait=True) is None
    finally:
        scoring.close()


def test_a_failed_score_is_raised_where_it_is_taken():
    scoring = BackgroundScoring(single_process())
    try:
        scoring.submit(lambda shard: {"acc": 1 / 0}, EvalShard(), POINT)
        with pytest.raises(ZeroDivisionError):
            scoring.take(wait=True)
        assert not scoring.pending
    finally:
        scoring.close()


def test_offline_and_background_scoring_exclude_each_other():
    with pytest.raises(ValueError, match="offline"):
        EvalSchedule(every=8, offline=True, background_scoring=True)
