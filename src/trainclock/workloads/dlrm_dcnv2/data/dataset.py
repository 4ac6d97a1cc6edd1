"""A folder of Criteo day files as the job reads it: days 0 .. train_days-1 are the training epoch,
the first half of the next day is the validation set (ceil(N/2) rows, as the reference's "val"
stage splits day 23). Each global batch is one contiguous block of the training days; the blocks
are visited in an order drawn from (seed, epoch), so batch s depends only on (seed, s): the same
samples whatever the micro-batch size, the number of processes, or a resume."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from trainclock.errors import DataError, require_folder
from trainclock.workloads.dlrm_dcnv2.data.criteo import Day, read_day


@dataclass
class CriteoDays:
    train: list[Day]
    validation: Day  # the first half of the eval day
    rows: np.ndarray  # each table's rows, repeated over its bag: the hash of each sparse column
    multi_hot: tuple[int, ...]
    _order_key: tuple[int, int, int] | None = field(default=None, init=False, repr=False)
    _order: np.ndarray | None = field(default=None, init=False, repr=False)

    @property
    def train_rows(self) -> int:
        return sum(map(len, self.train))

    def blocks(self, global_batch_size: int) -> int:
        return self.train_rows // global_batch_size

    def train_batch(self, seed: int, step: int, global_batch_size: int, rows: slice = slice(None)) -> dict[str, torch.Tensor]:
        """Rows `rows` of step `step`'s global batch: a block of consecutive samples, the blocks in an
        order drawn per epoch; a rank reads only its own rows of the block."""
        blocks = self.blocks(global_batch_size)
        epoch, index = divmod(step, blocks)
        block = int(self._block_order(seed, epoch, blocks)[index])
        first, last, _ = rows.indices(global_batch_size)
        return self._slice(self.train, block * global_batch_size + first, last - first)

    def _block_order(self, seed: int, epoch: int, blocks: int) -> np.ndarray:
        # one permutation per epoch, not per step (the full-size day files hold 76k blocks of 55,296)
        if self._order_key != (seed, epoch, blocks):
            self._order_key, self._order = (seed, epoch, blocks), np.random.default_rng([seed, epoch]).permutation(blocks)
        return self._order

    def validation_rows(self, start: int, stop: int) -> dict[str, torch.Tensor]:
        return self._slice([self.validation], start, stop - start)

    def _slice(self, days: list[Day], start: int, count: int) -> dict[str, torch.Tensor]:
        """Rows [start, start+count) of the days laid end to end: one contiguous read per day touched."""
        ends = np.cumsum([len(d) for d in days]).tolist()
        parts = []
        while count > 0:
            d = bisect.bisect_right(ends, start)
            begin = start - (ends[d - 1] if d else 0)
            take = min(count, len(days[d]) - begin)
            parts.append(_rows(days[d], begin, begin + take))
            start, count = start + take, count - take
        dense, labels, sparse = (np.concatenate(p) if len(parts) > 1 else p[0] for p in zip(*parts))
        sparse = torch.from_numpy(sparse.astype(np.int64)) % torch.from_numpy(self.rows)
        return {"dense": torch.from_numpy(dense), "sparse": sparse, "labels": torch.from_numpy(labels)}


def _rows(day: Day, begin: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dense = np.array(day.dense[begin:end], dtype=np.float32)
    labels = np.array(day.labels[begin:end], dtype=np.float32)
    sparse = np.concatenate([a[begin:end] for a in day.sparse], axis=1)
    return dense, labels, sparse


def open_days(folder: Path, train_days: int, rows: tuple[int, ...], multi_hot: tuple[int, ...],
              global_batch_size: int) -> CriteoDays:
    require_folder(folder, "give the folder of day_X_* files")
    train = [read_day(folder, d, multi_hot) for d in range(train_days)]
    evaluation = read_day(folder, train_days, multi_hot)
    half = len(evaluation) // 2 + len(evaluation) % 2
    if half == 0:
        raise DataError(f"the eval day day_{train_days} in {folder} holds no samples")
    validation = Day(evaluation.dense[:half], evaluation.labels[:half], [a[:half] for a in evaluation.sparse])
    widths = [a.shape[1] for a in evaluation.sparse]
    days = CriteoDays(train, validation, np.repeat(np.asarray(rows, dtype=np.int64), widths), tuple(widths))
    if days.blocks(global_batch_size) == 0:
        raise DataError(f"the training days in {folder} hold {days.train_rows:,} samples, fewer than one global "
                        f"batch of {global_batch_size:,}; give more data or a smaller --gbs")
    return days
