"""Batches of detection data: lists of images (float, 0-1, each its own size) and target dicts
(boxes x1y1x2y2, labels, and for Mask R-CNN the objects' outlines: data/outlines.py), as the
detection models take them. The order depends only on the run's seed: sample k of the run is
position k mod N of epoch k // N's permutation, flipped horizontally (the references' only
training augmentation) by a generator seeded with (seed, k). Step s's global batch is samples s*B .. s*B+B-1, so any number of ranks or
a resume at any step sees the same images; the loop cuts a rank's rows and micro-batches out of
the lists (batches.TreeBatch).

With a DeviceJpegDecoder (datasets/image_decode.py; the default on CUDA, --decode-on-device) the
host reads each image's bytes and its size from the header only, and the rows' images are decoded,
flipped and made float on the device (the model's transform resizes them there): the same images
as PIL's to within libjpeg's rounding (tests/workloads/detection/test_device_decode.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from trainclock.errors import DataError
from trainclock.workloads.detection.data.layout import ImageRecord, Split, pixel_limit
from trainclock.workloads.detection.data.outlines import flip_outlines, outlines
from trainclock.datasets.image_decode import DeviceJpegDecoder, read


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


@dataclass(frozen=True)
class EncodedImage:
    """An image as the host reads it for a DeviceJpegDecoder: its JPEG bytes (or a PNG's pixels)."""

    data: torch.Tensor
    path: str
    flip: bool = False


def read_encoded(record: ImageRecord, flip: bool = False) -> EncodedImage:
    """The record's file as bytes, its size checked against the labels from the header alone."""
    data, width, height = read(str(record.file))
    if (height, width) != (record.height, record.width):
        raise DataError(f"image {record.file} is {width}x{height}, its labels say {record.width}x{record.height}")
    return EncodedImage(data, str(record.file), flip)


def decode_images(decoder: DeviceJpegDecoder, items: list[EncodedImage]) -> list[torch.Tensor]:
    """The items decoded on the decoder's device as read_image makes them (3 x H x W float in
    [0, 1]), each flipped where its sample drew a flip."""
    def finish(image: torch.Tensor, item: EncodedImage) -> torch.Tensor:
        return (image.flip(-1) if item.flip else image).float().div_(255)

    return decoder.run(lambda: decoder.decode(items, finish))


def target(record: ImageRecord, masks: bool) -> dict[str, torch.Tensor]:
    """boxes and labels; with `masks`, each object's outline (data/outlines.py), rasterised by the
    model at 28x28 for the regions it samples (mask_targets.py), never decoded here."""
    out = {"boxes": torch.from_numpy(record.boxes), "labels": torch.from_numpy(record.labels)}
    if masks:
        if any(s is None for s in record.segmentations):
            raise DataError(f"image {record.file}: a box has no segmentation (a mask model needs one per box)")
        out.update(outlines(record.segmentations))
    return out


def flip_target(target: dict[str, torch.Tensor], width: int) -> dict[str, torch.Tensor]:
    """The target of the image mirrored left to right."""
    boxes = target["boxes"].clone()
    boxes[:, [0, 2]] = width - target["boxes"][:, [2, 0]]
    flipped = {**target, "boxes": boxes}
    if "mask_edges" in target:
        flipped["mask_edges"] = flip_outlines(target["mask_edges"], width)
    return flipped


def hflip(image: torch.Tensor, target: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The image and its target mirrored left to right (the PIL path; a device decode flips on the device)."""
    return image.flip(-1), flip_target(target, image.shape[-1])


class TrainBatches:
    """job.batch: rows `rows` of step s's global batch, {"images": [...], "targets": [...]}: only
    those are decoded (by `decoder`, on its device, where given). Sample k of the run depends on
    (seed, k) alone, whatever the rank count."""

    def __init__(self, split: Split, seed: int, global_batch: int, masks: bool,
                 decoder: DeviceJpegDecoder | None = None) -> None:
        self.split, self.seed, self.global_batch, self.masks = split, seed, global_batch, masks
        self.decoder = decoder
        self._epoch, self._order = -1, np.empty(0, dtype=np.int64)

    def position(self, k: int) -> int:
        epoch, pos = divmod(k, len(self.split.records))
        if epoch != self._epoch:
            self._epoch = epoch
            self._order = np.random.default_rng([self.seed, epoch]).permutation(len(self.split.records))
        return int(self._order[pos])

    def sample(self, k: int) -> tuple[torch.Tensor | EncodedImage, dict[str, torch.Tensor]]:
        """Sample k's image (decoded; with a decoder, as read for it) and target, flipped where drawn."""
        record = self.split.records[self.position(k)]
        flip = bool(np.random.default_rng([self.seed, k, 1]).random() < 0.5)
        labels = target(record, self.masks)
        if self.decoder is not None:  # the decoder flips the image on the device
            return read_encoded(record, flip), (flip_target(labels, record.width) if flip else labels)
        image = read_image(record)
        return hflip(image, labels) if flip else (image, labels)

    def __call__(self, step: int, rows: slice) -> dict[str, list]:
        samples = [self.sample(step * self.global_batch + row) for row in range(*rows.indices(self.global_batch))]
        images = [image for image, _ in samples]
        if self.decoder is not None:
            images = decode_images(self.decoder, images)
        return {"images": images, "targets": [labels for _, labels in samples]}


class EvalBatches:
    """A rank's contiguous share of the validation images, in batches of (images, image ids). Every
    rank runs the same number of forwards (a data-parallel wrapper may meet the others in each):
    a short rank repeats its last image under id -1, whose detections are dropped."""

    def __init__(self, split: Split, batch: int, shard: tuple[int, int],
                 decoder: DeviceJpegDecoder | None = None) -> None:
        rank, ranks = shard
        n = len(split.records)
        mine = split.records[rank * n // ranks:(rank + 1) * n // ranks]
        padding = -(-(-(-n // ranks)) // batch) * batch - len(mine)  # ceil(ceil(n / ranks) / batch) forwards
        self.ids = [r.id for r in mine] + [-1] * padding
        self.records = mine + [(mine or split.records)[-1]] * padding
        self.batch, self.decoder = batch, decoder

    def __iter__(self) -> Iterator[tuple[list[torch.Tensor], list[int]]]:
        for i in range(0, len(self.records), self.batch):
            records = self.records[i:i + self.batch]
            if self.decoder is None:
                images = [read_image(r) for r in records]
            else:
                images = decode_images(self.decoder, [read_encoded(r) for r in records])
            yield images, self.ids[i:i + self.batch]
