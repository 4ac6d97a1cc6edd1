"""How the loop handles a batch it never looks inside: select a data-parallel rank's rows, cut
micro-batches, move to a device. The default treats tuples and dicts as containers and tensors
and lists (images of several sizes, their boxes and masks) as rows along the first dimension."""

from __future__ import annotations

from typing import Any

import torch


class TreeBatch:
    def rows(self, batch: Any, rows: slice) -> Any:
        if isinstance(batch, dict):
            return {k: self.rows(v, rows) for k, v in batch.items()}
        if isinstance(batch, tuple):
            return tuple(self.rows(v, rows) for v in batch)
        return batch[rows]

    def size(self, batch: Any) -> int:
        if isinstance(batch, dict):
            return self.size(next(iter(batch.values())))
        if isinstance(batch, tuple):
            return self.size(batch[0])
        return len(batch)

    def to(self, batch: Any, device: torch.device) -> Any:
        if isinstance(batch, dict):
            return {k: self.to(v, device) for k, v in batch.items()}
        if isinstance(batch, (tuple, list)):
            return type(batch)(self.to(v, device) for v in batch)
        if isinstance(batch, torch.Tensor):
            return batch.to(device, non_blocking=True)
        return batch

    def pin_memory(self, batch: Any) -> Any:
        """The batch in page-locked host memory, so copies to a GPU can run asynchronously."""
        if isinstance(batch, dict):
            return {k: self.pin_memory(v) for k, v in batch.items()}
        if isinstance(batch, (tuple, list)):
            return type(batch)(self.pin_memory(v) for v in batch)
        if isinstance(batch, torch.Tensor) and batch.device.type == "cpu":
            return batch.pin_memory()
        return batch

    def micro_batches(self, batch: Any, micro: int) -> list[Any]:
        """Consecutive micro-batches of `micro` rows (the rank's rows divide evenly: checked at resolve)."""
        n = self.size(batch)
        return [self.rows(batch, slice(i, i + micro)) for i in range(0, n, micro)]
