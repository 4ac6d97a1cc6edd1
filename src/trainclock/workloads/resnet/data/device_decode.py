"""ResNet's JPEG decoding on the run's device (the generic part: datasets/image_decode.py): the
loader workers only read each sample's file and its JPEG header and draw its crop and flip (the PIL
path's generator, in the PIL path's order, so a sample gets the same crop whichever path decodes
it); the batch function then decodes the rank's rows on the device, crops and resizes each image
with antialiased bilinear (torchvision's tensor kernel, which follows PIL's to within rounding),
flips, and stacks uint8 NCHW on the device.

Why: PIL decoding and cropping cost a CPU core per ~430 full-size images/s, so one GPU at
NVIDIA's ~7,090 images/s would need ~24 host cores; reading bytes and a header costs a small
fraction of that (benchmarks/resnet_decode.py). Used on CUDA by default (--decode-on-device)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from trainclock.datasets.image_decode import DeviceJpegDecoder, read
from trainclock.workloads.resnet.data.transforms import ImageTransforms, crop_box

__all__ = ["DeviceDecoder", "Encoded", "eval_sample", "read", "train_sample"]


@dataclass(frozen=True)
class Encoded:
    """What a worker returns for one sample: its file as read, and the augmentation already drawn."""

    data: torch.Tensor  # the JPEG's bytes (1-D uint8); or, for a file that is not a JPEG, PIL's uint8 CHW decode
    path: str
    box: tuple[int, int, int, int] | None = None  # training crop (top, left, height, width); None: evaluation
    flip: bool = False


def train_sample(path: str, t: ImageTransforms, rng: np.random.Generator) -> Encoded:
    """transforms.train_image's worker half: the same draws from rng, in the same order."""
    data, width, height = read(path)
    box = crop_box(rng, width, height, t)
    return Encoded(data, path, box, flip=bool(rng.random() < 0.5))


def eval_sample(path: str) -> Encoded:
    return Encoded(read(path)[0], path)


class DeviceDecoder:
    """Decodes workers' Encoded samples into a uint8 NCHW batch on `device`. One per loader (train,
    eval): each owns a CUDA stream, and those two loaders run on different threads."""

    def __init__(self, device: torch.device, transforms: ImageTransforms, chunk: int) -> None:
        self.device, self.transforms = device, transforms
        self.jpegs = DeviceJpegDecoder(device, chunk)

    def __call__(self, items: list[Encoded]) -> torch.Tensor:
        return self.jpegs.run(lambda: torch.stack(self.jpegs.decode(items, self._finish)))

    def _finish(self, image: torch.Tensor, item: Encoded) -> torch.Tensor:
        """transforms.train_image / eval_image's pixel work on a decoded CHW tensor."""
        import torchvision.transforms.v2.functional as F  # torchvision (1.4 s to import): only where an image is transformed

        t = self.transforms
        if item.box is None:  # evaluation: shorter side to t.resize, then the center crop
            return F.center_crop(F.resize(image, [t.resize], antialias=True), [t.crop, t.crop])
        top, left, h, w = item.box
        # per image: the decodes differ in size, and a batched crop (roi_align) has no antialiasing
        image = F.resized_crop(image, top, left, h, w, [t.crop, t.crop], antialias=True)
        return F.horizontal_flip(image) if item.flip else image
