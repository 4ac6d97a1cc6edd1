"""The detection models' input transform: torchvision's GeneralizedRCNNTransform (resize, normalise,
pad into a batch) with two changes.

One training size is used as it is: torchvision draws it from the list on the host (an .item() of
a CPU random number per image) even where the list holds one size, as both references' do.

Mask R-CNN's batch shapes come from a few buckets: torchvision pads a batch to its largest image,
rounded up to 32 pixels; with COCO's aspect ratios resized to a short side of 800 and a long side
of at most 1333, batches of 2 come in about 250 shapes, and each new one costs a cuDNN algorithm
search (cudnn.benchmark) or a recompilation. Padding each side up to the next of a few sizes instead
(800 exactly, then steps of 128 to 1344: 6 sides) leaves at most 36 shapes, 35 on COCO-like sizes
for 4.9% more pixels (tests/workloads/detection/test_transform.py); the padding is zeros beyond
each image's own size, which image_sizes keeps."""

from __future__ import annotations

import bisect

import torch
from torch import Tensor
from torchvision.models.detection.transform import GeneralizedRCNNTransform

STEP = 128  # a bucket every 128 pixels above the short side (a multiple of the FPN's stride 32)


def bucket_sides(min_size: int, max_size: int, step: int = STEP, stride: int = 32) -> tuple[int, ...]:
    """The padded side lengths: the short side itself (rounded up to the stride), then every `step`
    up to the long side's limit (rounded up to the stride)."""
    first = -(-min_size // stride) * stride
    last = -(-max_size // stride) * stride
    return tuple(range(first, last, step)) + (last,)


def bucket_of(side: int, sides: tuple[int, ...]) -> int:
    """The smallest bucket that holds `side` (a side longer than every bucket keeps its own, rounded to 32)."""
    i = bisect.bisect_left(sides, side)
    return sides[i] if i < len(sides) else -(-side // 32) * 32


class DetectionTransform(GeneralizedRCNNTransform):
    """GeneralizedRCNNTransform without a host read for its one training size, and with `bucketed`,
    batches padded to bucketed heights and widths."""

    def __init__(self, min_size: int, max_size: int, image_mean: list[float], image_std: list[float],
                 fixed_size: tuple[int, int] | None = None, bucketed: bool = False) -> None:
        super().__init__(min_size, max_size, image_mean, image_std, fixed_size=fixed_size)
        self.sides = bucket_sides(min_size, max_size) if bucketed else None

    def torch_choice(self, k: list[int]) -> int:
        return k[0] if len(k) == 1 else super().torch_choice(k)

    def resize(self, image: Tensor, target: dict[str, Tensor] | None = None) -> tuple[Tensor, dict[str, Tensor] | None]:
        """torchvision's resize, which also scales Mask R-CNN's outlines (data/outlines.py) as the boxes."""
        height, width = image.shape[-2:]
        image, target = super().resize(image, target)
        if target is not None and "mask_edges" in target:
            # by Python floats: a tensor of the ratios (resize_boxes') would be a host-to-device copy
            x_ratio, y_ratio = image.shape[-1] / width, image.shape[-2] / height
            points = target["mask_edges"].unflatten(-1, (2, 2))  # (..., 2 ends, x y)
            target["mask_edges"] = torch.stack([points[..., 0] * x_ratio, points[..., 1] * y_ratio], -1).flatten(-2)
        return image, target

    def batch_images(self, images: list[Tensor], size_divisible: int = 32) -> Tensor:
        if self.sides is None:
            return super().batch_images(images, size_divisible)
        height = bucket_of(max(img.shape[-2] for img in images), self.sides)
        width = bucket_of(max(img.shape[-1] for img in images), self.sides)
        batched = images[0].new_zeros((len(images), images[0].shape[0], height, width))
        for padded, img in zip(batched, images):
            padded[:, : img.shape[-2], : img.shape[-1]].copy_(img)
        return batched

