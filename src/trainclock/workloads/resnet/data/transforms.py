"""The reference's image transforms (torchvision's classification recipe and MLPerf's resnet):
training: decode, random resized crop (scale 0.08-1, aspect 3/4-4/3) to the crop size, random
horizontal flip; evaluation: decode, resize the shorter side, center crop. Both are applied with
torchvision's functional ops; the training randomness comes from a generator seeded by (run seed,
sample index) instead of the process's global RNG, so a sample is augmented the same way whichever
worker or rank decodes it, before or after a resume. Images leave as uint8 CHW tensors (a quarter
of the bytes through the workers' shared memory); normalisation happens on the device."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from trainclock.errors import DataError

MEAN = (0.485, 0.456, 0.406)  # ImageNet's per-channel statistics, as the reference normalises
STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class ImageTransforms:
    crop: int  # training crop and evaluation center crop (224 at full size)
    resize: int  # evaluation resize of the shorter side (256 at full size)
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)


DECODE_ERRORS = (OSError, SyntaxError, ValueError, Image.DecompressionBombError)  # what PIL raises for a bad file


def decode_error(path: str, reason: object) -> DataError:
    """The one line either decoding path (PIL here, device_decode's) raises for a file it cannot decode."""
    return DataError(f"cannot decode image {path} ({reason}); replace or delete the file")


def decode(path: str) -> Image.Image:
    try:
        with Image.open(path) as image:
            return image.convert("RGB")  # forces the full decode: a truncated file fails here
    except DECODE_ERRORS as e:
        raise decode_error(path, e) from None


def crop_box(rng: np.random.Generator, width: int, height: int, t: ImageTransforms) -> tuple[int, int, int, int]:
    """RandomResizedCrop.get_params with an explicit generator: (top, left, height, width)."""
    area = width * height
    log_ratio = (math.log(t.ratio[0]), math.log(t.ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*t.scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    in_ratio = width / height  # fallback: the central crop, as torchvision's
    if in_ratio < t.ratio[0]:
        w, h = width, int(round(width / t.ratio[0]))
    elif in_ratio > t.ratio[1]:
        h, w = height, int(round(height * t.ratio[1]))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def as_tensor(image: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.asarray(image, dtype=np.uint8).copy()).permute(2, 0, 1)


def train_image(path: str, t: ImageTransforms, rng: np.random.Generator) -> torch.Tensor:
    import torchvision.transforms.functional as F  # torchvision (1.4 s to import): only where an image is transformed

    image = decode(path)
    top, left, h, w = crop_box(rng, image.width, image.height, t)
    image = F.resized_crop(image, top, left, h, w, [t.crop, t.crop], antialias=True)
    if rng.random() < 0.5:
        image = F.hflip(image)
    return as_tensor(image)


def eval_image(path: str, t: ImageTransforms) -> torch.Tensor:
    import torchvision.transforms.functional as F  # torchvision (1.4 s to import): only where an image is transformed

    image = F.center_crop(F.resize(decode(path), t.resize, antialias=True), [t.crop, t.crop])
    return as_tensor(image)


def normalize(images: torch.Tensor, channels_last: bool = True) -> torch.Tensor:
    """uint8 NCHW images -> float, normalised by ImageNet's statistics (on whatever device they are)."""
    mean = torch.tensor(MEAN, device=images.device).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=images.device).view(1, 3, 1, 1) * 255
    x = (images.float() - mean) / std
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x
