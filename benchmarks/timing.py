"""What the benchmark scripts share for timing: seconds per step, the machine's matmul peak measured
around a timing (a shared CPU's speed drifts over a run), and autocast by precision name. On a GPU
every timing waits for the device's queue to drain before reading the clock."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import torch

from trainclock.device.peak import matmul_peak_flops

CPU = torch.device("cpu")


def machine_peak(device: torch.device = CPU) -> float:
    """The faster of the bf16 and fp32 matmul peaks: MFU against what the machine can do at best."""
    return max(matmul_peak_flops(device, torch.bfloat16), matmul_peak_flops(device, torch.float32))


def autocast_for(precision: str, device: torch.device = CPU) -> Callable[[], contextlib.AbstractContextManager]:
    if precision == "bf16":
        return lambda: torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def sync(device: torch.device = CPU) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[int], object], steps: int, first: int = 0, warm_up: int = 0, device: torch.device = CPU) -> float:
    """Seconds per step of steps first..first+steps-1, after `warm_up` untimed steps just before
    them (first-touch, allocator warm-up, compilation)."""
    for s in range(first - warm_up, first):
        step(s)
    sync(device)
    start = time.perf_counter()
    for s in range(first, first + steps):
        step(s)
    sync(device)
    return (time.perf_counter() - start) / steps


def timed_at_peak(step: Callable[[int], object], steps: int, first: int = 0, warm_up: int = 0,
                  device: torch.device = CPU) -> tuple[float, float]:
    """(seconds per step, the machine peak averaged from just before and just after the timing)."""
    for s in range(first - warm_up, first):
        step(s)
    before = machine_peak(device)
    seconds = timed(step, steps, first, 0, device)
    return seconds, (before + machine_peak(device)) / 2


def cpu_timed(step: Callable[[], object], steps: int, warm_up: int = 1) -> float:
    """CPU seconds of this process per call of `step` (time.process_time: another job's load on a
    shared machine weighs less than in wall time), after `warm_up` untimed calls (first touch of
    the allocator and the kernels' workspaces)."""
    for _ in range(warm_up):
        step()
    start = time.process_time()
    for _ in range(steps):
        step()
    return (time.process_time() - start) / steps
