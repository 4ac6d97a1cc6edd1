"""Batches built ahead on a thread: the same batches in the same order as built in place, the next
ones made while a step trains, a jump (a resume) rebuilt in place, a data error raised at the
step that needs the batch."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from trainclock.errors import DataError
from trainclock.train.prefetch import BatchPrefetch, default_depth
from trainclock.workload.batches import TreeBatch


class Maker:
    def __init__(self, seconds: float = 0.0, fail_at: int | None = None) -> None:
        self.seconds, self.fail_at = seconds, fail_at
        self.calls: list[tuple[int, str]] = []

    def __call__(self, step: int) -> dict[str, torch.Tensor]:
        self.calls.append((step, threading.current_thread().name))
        if step == self.fail_at:
            raise DataError(f"cannot read step {step}'s file")
        time.sleep(self.seconds)
        return {"x": torch.full((2,), float(step))}


def test_batches_come_in_order_and_are_built_ahead_on_a_thread():
    maker = Maker()
    prefetch = BatchPrefetch(maker, TreeBatch(), depth=2, pin=False)
    try:
        got = [float(prefetch.get(step)["x"][0]) for step in range(5)]
    finally:
        prefetch.close()
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0]
    built = sorted(step for step, _ in maker.calls)
    assert built == sorted(set(built)) and built[:5] == [0, 1, 2, 3, 4]  # each step built once
    assert all(name.startswith("trainclock-batches") for step, name in maker.calls if step > 0)


def test_the_next_batch_is_ready_when_the_step_ends():
    maker = Maker(seconds=0.2)
    prefetch = BatchPrefetch(maker, TreeBatch(), depth=1, pin=False)
    try:
        prefetch.get(0)
        time.sleep(0.3)  # a step as long as building a batch
        start = time.perf_counter()
        prefetch.get(1)
        waited = time.perf_counter() - start
    finally:
        prefetch.close()
    assert waited < 0.1


def test_a_jump_rebuilds_in_place_and_an_error_surfaces_at_its_step():
    maker = Maker(fail_at=3)
    prefetch = BatchPrefetch(maker, TreeBatch(), depth=2, pin=False)
    try:
        assert float(prefetch.get(0)["x"][0]) == 0.0
        assert float(prefetch.get(7)["x"][0]) == 7.0  # a resume at step 7
        with pytest.raises(DataError, match="step 3"):
            prefetch.get(3)
    finally:
        prefetch.close()


def test_no_prefetch_on_a_cpu_and_pinned_batches_on_an_accelerator():
    assert default_depth(torch.device("cpu")) == 0 and default_depth(torch.device("cuda", 0)) == 2
    pinned = []

    class Recording(TreeBatch):
        def pin_memory(self, batch):
            pinned.append(batch)
            return batch

    maker = Maker()
    prefetch = BatchPrefetch(maker, Recording(), depth=1, pin=True)
    try:
        prefetch.get(0)
        prefetch.get(1)
    finally:
        prefetch.close()
    assert len(pinned) >= 2
    in_place = BatchPrefetch(Maker(), TreeBatch(), depth=0, pin=False)
    assert float(in_place.get(4)["x"][0]) == 4.0
    in_place.close()


def test_a_job_may_ask_for_batches_built_ahead_on_a_cpu():
    """On a CPU only a job whose batches cost about a step (TrainJob.cpu_prefetch_steps) gets a
    prefetch thread; an accelerator always builds two ahead."""
    assert default_depth(torch.device("cpu"), cpu_steps=1) == 1
    assert default_depth(torch.device("cuda", 0), cpu_steps=0) == 2
