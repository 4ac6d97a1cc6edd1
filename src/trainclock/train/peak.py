"""The machine's measured matmul peak, the denominator of MFU. Measured, never looked up:
the CPU here is shared and its speed drifts, so every timing is paired with a calibration."""

from __future__ import annotations

import time

import torch


def matmul_peak_flops(device: torch.device, dtype: torch.dtype, size: int | None = None, seconds: float = 0.5) -> float:
    """Best-of FLOP/s of square matmuls, after a warm-up (fresh memory is slow to touch)."""
    n = size or (8192 if device.type == "cuda" else 2048)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    _sync(device)
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for _ in range(3):
            a @ b
        _sync(device)
        best = max(best, 3 * 2 * n**3 / (time.perf_counter() - t0))
    return best


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
