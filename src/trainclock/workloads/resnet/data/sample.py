"""Made-up data in the resnet members' own layout (write_sample_data), to time the host pipeline
and feed tests without ImageNet: resnet-50 gets ImageNet's folder tree of JPEGs at ImageNet's
typical sizes and bytes; a CPU tier gets the Fashion-MNIST export's tree (28-pixel grayscale JPEGs
in its 10 class folders). Pixels are crops of a few smooth random textures (a 1/f spectrum, as
photographs have), so a JPEG costs about as many bytes, and as much decoding, as a photograph of
its size; white noise would be several times larger and slower to decode."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

from trainclock.datasets.sample_pictures import cut, textures

JPEG_QUALITY = 90
IMAGENET_CLASSES = 1000
# (width, height) drawn uniformly: ImageNet's photos are mostly 500 on the long side (500x375 the most
# common); the mean of these is 469x412, near ImageNet train's average of about 470x390, and at the slope
# below their JPEGs average about 110 KB, as ILSVRC2012_img_train.tar's 138 GB over 1,281,167 images
IMAGENET_SIZES = ((500, 375), (500, 375), (500, 375), (500, 375), (500, 333), (500, 333), (375, 500), (375, 500),
                  (333, 500), (500, 500), (400, 300), (640, 480))
IMAGENET_SLOPE = 1.1  # amplitude ~ 1/f^slope: tuned to the bytes per image above at quality 90
TEXTURES = 8  # distinct textures the images are cut from; more only costs time

Pixels = Callable[[str, int, int], np.ndarray]  # (split, class, i) -> H x W x 3 (or H x W) uint8


def image_path(root: Path, split: str, wnid: str, number: int) -> Path:
    """ImageNet's names: train/<wnid>/<wnid>_<n>.JPEG; val/<wnid>/ILSVRC2012_val_<n:08d>.JPEG (the
    validation images sorted into class folders, as the reference's valprep.sh leaves them)."""
    name = f"{wnid}_{number}.JPEG" if split == "train" else f"ILSVRC2012_val_{number:08d}.JPEG"
    return root / split / wnid / name


def write_tree(root: Path, classes: Sequence[str], counts: dict[str, Sequence[int]], pixels: Pixels,
               quality: int = JPEG_QUALITY) -> Path:
    """root/<split>/<class>/*.JPEG with counts[split][c] images of class c, each pixels(split, c, i).
    Pixels are drawn in order on this thread (a seeded generator gives the same tree every time);
    the JPEG encoder, which releases the GIL, runs on a thread per core."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        pending = []
        for split, per_class in counts.items():
            number = 0
            for c, count in enumerate(per_class):
                # every class folder in every split, if empty: scan refuses splits whose classes differ
                (root / split / classes[c]).mkdir(parents=True, exist_ok=True)
                for i in range(count):
                    number += 1
                    path = image_path(root, split, classes[c], number if split == "val" else i + 1)
                    pending.append(pool.submit(_save, np.ascontiguousarray(pixels(split, c, i)), path, quality))
                    if len(pending) >= 64:  # bounded: a few thousand decoded images would not fit in memory
                        pending.pop(0).result()
        for job in pending:
            job.result()
    return root


def _save(pixels: np.ndarray, path: Path, quality: int) -> None:
    Image.fromarray(pixels).save(path, "JPEG", quality=quality)


def wnids(rng: np.random.Generator, count: int) -> list[str]:
    """Made-up WordNet ids in ImageNet's range (n01440764 .. n15075141), sorted as the folder is."""
    return [f"n{int(k):08d}" for k in sorted(rng.choice(np.arange(1_440_764, 15_075_142), count, replace=False))]


def spread(samples: int, classes: int) -> list[int]:
    return [samples // classes + (c < samples % classes) for c in range(classes)]


def write_images(root: Path, samples: int, seed: int, classes: Sequence[str], sizes: Sequence[tuple[int, int]],
                 slope: float, channels: int = 3) -> Path:
    """`samples` training images spread over the classes (every train class folder needs one, so
    there are at most `samples` classes, and at least 2: scan refuses fewer) and the smallest
    validation set the loader takes: one image."""
    rng = np.random.default_rng([seed, channels])
    classes = list(classes)[:samples]
    largest = max(max(size) for size in sizes)
    side = largest * 5 // 4 if channels == 3 else 4 * largest  # room for crops at many offsets
    bases = textures(rng, min(TEXTURES, samples + 1), side, slope, channels)
    counts = {"train": spread(samples, len(classes)), "val": [1] + [0] * (len(classes) - 1)}
    return write_tree(root, classes, counts, lambda split, c, i: cut(rng, bases, sizes[int(rng.integers(len(sizes)))]))


def write_imagenet(root: Path, samples: int, seed: int) -> Path:
    """ImageNet's layout: `samples` training JPEGs of ImageNet's sizes in up to 1000 class folders."""
    return write_images(root, samples, seed, wnids(np.random.default_rng(seed), IMAGENET_CLASSES), IMAGENET_SIZES,
                        IMAGENET_SLOPE)


def write_tier(root: Path, samples: int, seed: int, classes: Sequence[str], side: int) -> Path:
    """A CPU tier's export layout: side x side grayscale JPEGs in the Fashion-MNIST class folders."""
    return write_images(root, samples, seed, classes, [(side, side)], 1.0, channels=1)
