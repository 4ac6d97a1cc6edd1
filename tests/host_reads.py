"""Counts host reads: every `.item()`, `float(t)`, `bool(t)` goes through aten._local_scalar_dense,
which a TorchDispatchMode sees on a CPU as on a GPU, where each read makes the host wait for the device."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class HostReads(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))
