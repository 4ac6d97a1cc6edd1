"""Batches of detection data: lists of images (float, 0-1, each its own size) and target dicts
(boxes x1y1x2y2, labels, masks for Mask R-CNN), as torchvision's detection models take them. The
order depends only on the run's seed: sample k of the run is position k mod N of epoch k // N's
permutation, flipped horizontally (the references' only training augmentation) by a generator
seeded with (seed, k). Step s's global batch is samples s*B .. s*B+B-1, so any number of ranks or
a resume at any step sees the same images; the loop cuts a rank's rows and micro-batches out of
the lists (batches.TreeBatch)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from trainclock.errors import DataError
from trainclock.workloads.detection.data.layout import ImageRecord, Split, pixel_limit


def read_image(record: ImageRecord) -> torch.Tensor:
    """3 x H x W float in [0, 1]."""
    try:
        with Image.open(record.file) as image:
            array = np.asarray(image.convert("RGB"))
    except Image.DecompressionBombError:
        raise DataError(f"image {record.file} has more pixels than PIL's decompression-bomb limit "
                        f"({pixel_limit():,}): resize it or remove it from the labels") from None
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError, EOFError) as e:
        raise DataError(f"cannot decode image {record.file} ({type(e).__name__})") from None
    if array.shape[:2] != (record.height, record.width):
        raise DataError(f"image {record.file} is {array.shape[1]}x{array.shape[0]}, its labels say "
                        f"{record.width}x{record.height}")
    return torch.from_numpy(array.copy()).permute(2, 0, 1).float().div_(255)


def target(record: ImageRecord, masks: bool) -> dict[str, torch.Tensor]:
    out = {"boxes": torch.from_numpy(record.boxes), "labels": torch.from_numpy(record.labels)}
    if masks:
        out["masks"] = torch.from_numpy(record.masks())
    return out


def hflip(image: torch.Tensor, target: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    width = image.shape[-1]
    boxes = target["boxes"].clone()
    boxes[:, [0, 2]] = width - target["boxes"][:, [2, 0]]
    flipped = {**target, "boxes": boxes}
    if "masks" in target:
        flipped["masks"] = target["masks"].flip(-1)
    return image.flip(-1), flipped


class TrainBatches:
    """job.batch: rows `rows` of step s's global batch, {"images": [...], "targets": [...]}: only
    those are decoded. Sample k of the run depends on (seed, k) alone, whatever the rank count."""

    def __init__(self, split: Split, seed: int, global_batch: int, masks: bool) -> None:
        self.split, self.seed, self.global_batch, self.masks = split, seed, global_batch, masks
        self._epoch, self._order = -1, np.empty(0, dtype=np.int64)

    def position(self, k: int) -> int:
        epoch, pos = divmod(k, len(self.split.records))
        if epoch != self._epoch:
            self._epoch = epoch
            self._order = np.random.default_rng([self.seed, epoch]).permutation(len(self.split.records))
        return int(self._order[pos])

    def sample(self, k: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        record = self.split.records[self.position(k)]
        image, labels = read_image(record), target(record, self.masks)
        if np.random.default_rng([self.seed, k, 1]).random() < 0.5:
            image, labels = hflip(image, labels)
        return image, labels

    def __call__(self, step: int, rows: slice) -> dict[str, list]:
        samples = [self.sample(step * self.global_batch + row) for row in range(*rows.indices(self.global_batch))]
        return {"images": [image for image, _ in samples], "targets": [labels for _, labels in samples]}


class EvalBatches:
    """A rank's contiguous share of the validation images, in batches of (images, image ids). Every
    rank runs the same number of forwards (a data-parallel wrapper may meet the others in each):
    a short rank repeats its last image under id -1, whose detections are dropped."""

    def __init__(self, split: Split, batch: int, shard: tuple[int, int]) -> None:
        rank, ranks = shard
        n = len(split.records)
        mine = split.records[rank * n // ranks:(rank + 1) * n // ranks]
        padding = -(-(-(-n // ranks)) // batch) * batch - len(mine)  # ceil(ceil(n / ranks) / batch) forwards
        self.ids = [r.id for r in mine] + [-1] * padding
        self.records = mine + [(mine or split.records)[-1]] * padding
        self.batch = batch

    def __iter__(self) -> Iterator[tuple[list[torch.Tensor], list[int]]]:
        for i in range(0, len(self.records), self.batch):
            yield [read_image(r) for r in self.records[i:i + self.batch]], self.ids[i:i + self.batch]
