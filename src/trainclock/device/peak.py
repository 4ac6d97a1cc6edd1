"""The machine's measured matmul peak, the denominator of MFU, and the precision a run trains in.
Measured, never looked up: the CPU here is shared and its speed drifts, so every timing is paired
with a calibration, and a CPU without bf16 instructions (no AVX-512 BF16 / AMX) multiplies bf16
matrices through a scalar fallback about 100x slower than fp32: such a machine trains in fp32."""

from __future__ import annotations

import time

import torch

PRECISIONS = ("auto", "bf16", "fp32")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
BF16_MIN_ADVANTAGE = 1.2  # auto takes bf16 on a CPU only where its matmuls are clearly faster than fp32's
SECONDS_PER_MATMUL = 0.5  # the peak's square size halves until one product takes at most this long (slow bf16 fallbacks)


def matmul_peak_flops(device: torch.device, dtype: torch.dtype, size: int | None = None, seconds: float = 0.5) -> float:
    """Best-of FLOP/s of square matmuls, after a warm-up (fresh memory is slow to touch). Without
    a size, the largest power of two up to 8192 (GPU) or 2048 (CPU) whose product takes at most
    SECONDS_PER_MATMUL at the rate of a small probe, so a slow precision stays quick to measure."""
    n = size or _affordable_size(device, dtype, 8192 if device.type == "cuda" else 2048)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    _sync(device)
    best = 0.0
    deadline = time.perf_counter() + seconds
    while True:  # at least one timed round
        t0 = time.perf_counter()
        for _ in range(3):
            a @ b
        _sync(device)
        best = max(best, 3 * 2 * n**3 / (time.perf_counter() - t0))
        if time.perf_counter() >= deadline:
            return best


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' -> bf16 where the device multiplies bf16 matrices faster (every bf16-capable GPU;
    on a CPU, measured now), else fp32. An explicit bf16 or fp32 is kept as asked."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if bf16_speedup(device) >= BF16_MIN_ADVANTAGE else "fp32"


def bf16_speedup(device: torch.device, size: int = 256) -> float:
    """bf16 over fp32 matmul FLOP/s at a size the CPU's bf16 fallback still does in milliseconds."""
    fp32 = matmul_peak_flops(device, torch.float32, size=size, seconds=0.1)
    bf16 = matmul_peak_flops(device, torch.bfloat16, size=size, seconds=0.1)
    return bf16 / fp32


def _affordable_size(device: torch.device, dtype: torch.dtype, largest: int) -> int:
    """Doubles a probe's size while the next product is predicted (from the rate at this size, a
    lower bound for larger ones) to take at most SECONDS_PER_MATMUL."""
    n = 256
    while n < largest:
        rate = matmul_peak_flops(device, dtype, size=n, seconds=0.0)
        if 2 * (2 * n) ** 3 / rate > SECONDS_PER_MATMUL:
            break
        n *= 2
    return n


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
