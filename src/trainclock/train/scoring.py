"""An evaluation's metric computed on a thread while training goes on (EvalSchedule.background_scoring).

The predictions are made and gathered across ranks where the evaluation falls, as inline; rank 0
then scores them (COCO evaluation takes seconds of host time) on a thread of its own, and the loop
takes the values at one of its reads of the losses: the log shows eval_start, the next block_start,
then eval_accuracy and eval_stop when the values are in, as NVIDIA's detection logs do."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from trainclock.distributed.context import ParallelContext
from trainclock.errors import TrainclockError
from trainclock.workload.base import EvalShard


@dataclass(frozen=True)
class EvalPoint:
    """Where an evaluation was taken: the step after which, its samples, its count in the log's unit."""

    step: int
    samples: int
    count: int | float


class BackgroundScoring:
    """At most one evaluation being scored at a time: the loop takes it before it starts the next."""

    def __init__(self, ctx: ParallelContext) -> None:
        self._ctx = ctx
        # rank 0 alone scores: the others would repeat the same host work beside their own loaders
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="trainclock-score") if ctx.env.is_main else None
        self._pending: tuple[EvalPoint, Future | None] | None = None

    @property
    def pending(self) -> bool:
        return self._pending is not None

    def submit(self, score: Callable[[EvalShard], dict[str, float]], reduced: EvalShard, point: EvalPoint) -> None:
        if self._pending is not None:
            raise RuntimeError("take the pending evaluation before submitting another")
        future = self._pool.submit(score, reduced) if self._pool is not None else None
        self._pending = (point, future)

    def take(self, wait: bool) -> tuple[EvalPoint, dict[str, float]] | None:
        """The pending evaluation's point and values on every rank once rank 0 has them (with
        `wait`, after waiting for them); None while they are still being computed. Collective
        while an evaluation is pending: every rank calls it at the same reads."""
        if self._pending is None:
            return None
        point, future = self._pending
        answer, error = None, None
        if future is not None and (wait or future.done()):
            try:
                answer = ("values", future.result())
            except Exception as e:  # noqa: BLE001 - sent to the other ranks, then raised on this one
                answer, error = ("error", f"{type(e).__name__}: {e}"), e
        answer = self._ctx.from_main(answer)
        if answer is None:
            return None
        self._pending = None
        kind, payload = answer
        if kind == "error":
            if error is not None:
                raise error
            raise TrainclockError(f"rank 0 failed to score the evaluation at {point.count}: {payload}")
        return point, payload

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
