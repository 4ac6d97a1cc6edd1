"""Images decoded and augmented in DataLoader worker processes, in an order that depends only on
the run's seed: sample k (counted over the whole run) is position k mod N of epoch k // N's
permutation of the N training images, augmented by a generator seeded with (seed, k). Step s's
global batch is samples s*B .. s*B+B-1, so any number of ranks, workers, or a resume at any step,
sees the same images with the same crops.

A rank decodes only its own rows of each global batch: its workers are started for those rows.
With a DeviceDecoder (device_decode.py, the default on CUDA) the workers only read files and draw
the crops, and the batch is decoded on the device; the images are the same crops either way."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from trainclock.errors import DataError, UsageError
from trainclock.workloads.resnet.data.device_decode import DeviceDecoder, Encoded, eval_sample, train_sample
from trainclock.workloads.resnet.data.folder import Split
from trainclock.workloads.resnet.data.transforms import ImageTransforms, eval_image, train_image


class _Failed:
    """What a worker returns for an image it cannot decode: the one-line reason, raised in the
    main process (an exception raised in a worker reaches it wrapped in a multi-line traceback)."""

    def __init__(self, message: str) -> None:
        self.message = message


def _collate(items: list) -> Any:
    for item in items:
        if isinstance(item, _Failed):
            return item
    images = [i for i, _ in items]
    labels = torch.tensor([label for _, label in items], dtype=torch.int64)
    return (images if isinstance(images[0], Encoded) else torch.stack(images)), labels  # Encoded: decoded later


class TrainImages(Dataset):
    """Sample k's image decoded (uint8 CHW) or, `encoded`, its file and drawn crop (Encoded)."""

    def __init__(self, split: Split, transforms: ImageTransforms, seed: int, encoded: bool = False) -> None:
        self.split, self.transforms, self.seed, self.encoded = split, transforms, seed, encoded
        self._epoch, self._order = -1, np.empty(0, dtype=np.int64)

    def position(self, k: int) -> int:
        """The image index of sample k of the run."""
        epoch, pos = divmod(k, len(self.split))
        if epoch != self._epoch:  # one permutation per epoch, cached per worker
            self._epoch, self._order = epoch, np.random.default_rng([self.seed, epoch]).permutation(len(self.split))
        return int(self._order[pos])

    def __getitem__(self, k: int):
        i = self.position(k)
        try:
            sample = train_sample if self.encoded else train_image
            image = sample(self.split.files[i], self.transforms, np.random.default_rng([self.seed, k, 1]))
        except DataError as e:
            return _Failed(str(e))
        return image, self.split.labels[i]

    def __len__(self) -> int:
        return len(self.split)


class _Steps:
    """Batch sampler: this rank's sample indices of step `first`, `first`+1, ... (endless)."""

    def __init__(self, first: int, global_batch: int, rows: slice) -> None:
        self.first, self.global_batch, self.rows = first, global_batch, rows

    def __iter__(self) -> Iterator[list[int]]:
        step = self.first
        while True:
            base = step * self.global_batch
            yield list(range(base + self.rows.start, base + self.rows.stop))
            step += 1


def check_workers(workers: int) -> int:
    if workers < 0:
        raise UsageError(f"--loader-workers must be 0 or more, got {workers}")
    return workers


class StepLoader:
    """job.batch: this rank's rows of step s's global batch, {"image": uint8, "label": int64},
    prefetched by workers while the model trains. Asked for the step after the last it returned, it continues; asked for any
    other step (the first call, a resume), it restarts the workers there; asked for the same step
    twice (the warm-up, then step 0), it returns the batch it already has. `rows` are those its
    workers were started for (a rank's, for the whole run). With a `decoder`, the images are decoded
    on its device (a batch already there)."""

    def __init__(self, split: Split, transforms: ImageTransforms, seed: int, global_batch: int, rows: slice,
                 workers: int, prefetch: int = 4, decoder: DeviceDecoder | None = None) -> None:
        self.dataset = TrainImages(split, transforms, seed, encoded=decoder is not None)
        self.decoder = decoder
        self.global_batch, self.rows, self.workers, self.prefetch = global_batch, rows, workers, prefetch
        self._iterator: Iterator | None = None
        self._next = -1
        self._last: tuple[int, dict[str, torch.Tensor]] | None = None

    def _start(self, step: int) -> None:
        extra = {"prefetch_factor": self.prefetch, "persistent_workers": False} if self.workers else {}
        self._iterator = iter(DataLoader(self.dataset, batch_sampler=_Steps(step, self.global_batch, self.rows),
                                         num_workers=self.workers, collate_fn=_collate, **extra))
        self._next = step

    def __call__(self, step: int, rows: slice) -> dict[str, torch.Tensor]:
        if self._last is not None and self._last[0] == step and rows == self.rows:
            return self._last[1]
        if self._iterator is None or step != self._next or rows != self.rows:
            self.rows = rows  # a run asks for one rank's rows throughout: other rows restart the workers
            self._start(step)
        out = next(self._iterator)
        if isinstance(out, _Failed):
            raise DataError(out.message)
        self._next = step + 1
        images, labels = out
        batch = {"image": images if self.decoder is None else self.decoder(images), "label": labels}
        self._last = (step, batch)
        return batch


class EvalImages(Dataset):
    def __init__(self, split: Split, transforms: ImageTransforms, encoded: bool = False) -> None:
        self.split, self.transforms, self.encoded = split, transforms, encoded

    def __getitem__(self, i: int):
        # i < 0 is padding: a rank out of images still joins every forward (ranks must meet in each)
        try:
            path = self.split.files[max(i, 0)]
            image = eval_sample(path) if self.encoded else eval_image(path, self.transforms)
        except DataError as e:
            return _Failed(str(e))
        return image, self.split.labels[i] if i >= 0 else -1

    def __len__(self) -> int:
        return len(self.split)


class EvalLoader:
    """A rank's shard of the validation set in fixed batches, every rank running the same number
    of forwards; padding rows carry label -1 and are not counted. Workers persist across evals.
    With a `decoder`, the images are decoded on its device."""

    def __init__(self, split: Split, transforms: ImageTransforms, micro: int, shard: tuple[int, int],
                 workers: int, decoder: DeviceDecoder | None = None) -> None:
        self.decoder = decoder
        rank, ranks = shard
        n = len(split)
        mine = list(range(rank * n // ranks, (rank + 1) * n // ranks))
        forwards = math.ceil(math.ceil(n / ranks) / micro)
        mine += [-1] * (forwards * micro - len(mine))
        batches = [mine[i * micro:(i + 1) * micro] for i in range(forwards)]
        extra = {"prefetch_factor": 4, "persistent_workers": True} if workers else {}
        self.loader = DataLoader(EvalImages(split, transforms, encoded=decoder is not None), batch_sampler=batches,
                                 num_workers=workers,
                                 collate_fn=_collate, **extra)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for out in self.loader:
            if isinstance(out, _Failed):
                raise DataError(out.message)
            images, labels = out
            yield (images if self.decoder is None else self.decoder(images)), labels
