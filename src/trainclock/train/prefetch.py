"""The next steps' batches, built on a thread while the current step trains. A batch is a function
of (seed, step, rows) alone, so building it ahead changes nothing but when the host does the
work. On a GPU the built batch is pinned, so the step's non-blocking copies overlap the device's
work; the loop then only waits for a batch that is not ready yet."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from trainclock.workload.batches import TreeBatch


def default_depth(device: torch.device, cpu_steps: int = 0) -> int:
    """Steps built ahead: two on an accelerator; on a CPU, where the step's own threads already
    occupy every core and a batch built beside them takes its time from the step, the job's own
    choice (TrainJob.cpu_prefetch_steps: none unless its batches cost about a step and release the GIL)."""
    return 2 if device.type != "cpu" else cpu_steps


class BatchPrefetch:
    def __init__(self, make: Callable[[int], Any], batches: TreeBatch, depth: int, pin: bool) -> None:
        self._make, self._batches, self._depth, self._pin = make, batches, depth, pin
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="trainclock-batches") if depth > 0 else None
        self._ahead: deque[tuple[int, Future]] = deque()

    def _build(self, step: int) -> Any:
        batch = self._make(step)
        return self._batches.pin_memory(batch) if self._pin else batch

    def get(self, step: int) -> Any:
        """Step `step`'s batch; asks for the steps after it to be built meanwhile."""
        if self._pool is None:
            return self._build(step)
        while self._ahead and self._ahead[0][0] < step:  # steps skipped (never, in a run): dropped
            _drop(self._ahead.popleft()[1])
        if self._ahead and self._ahead[0][0] == step:
            batch = self._ahead.popleft()[1].result()
        else:  # the first step, or one after a jump: nothing was built for it
            self._cancel()
            batch = self._build(step)
        after = self._ahead[-1][0] if self._ahead else step
        for ahead in range(after + 1, step + self._depth + 1):
            self._ahead.append((ahead, self._pool.submit(self._build, ahead)))
        return batch

    def _cancel(self) -> None:
        while self._ahead:
            _drop(self._ahead.popleft()[1])

    def close(self) -> None:
        """Stops building ahead; waits for a batch being built (its workers may hold files open)."""
        self._cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _drop(future: Future) -> None:
    """Cancel a build, or wait for one already running: a workload's batch maker (a loader with an
    epoch cache, worker processes) is called by one thread at a time."""
    if not future.cancel():
        future.exception()  # waits; its error belongs to a batch nobody asked for
