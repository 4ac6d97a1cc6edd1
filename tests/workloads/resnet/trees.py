"""Tiny ImageNet-layout JPEG trees that the tests write themselves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def write_tree(root: Path, classes: int = 2, per_class: int = 4, val_per_class: int = 2, size: tuple[int, int] = (40, 32),
               seed: int = 0) -> Path:
    """root/train/<class>/*.JPEG and root/val/<class>/*.JPEG of random RGB images, each class a tint."""
    rng = np.random.default_rng(seed)
    for split, count in (("train", per_class), ("val", val_per_class)):
        for c in range(classes):
            folder = root / split / f"n{c:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
                pixels[..., c % 3] = 255 - c * 40  # a class-specific tint
                Image.fromarray(pixels).save(folder / f"{split}_{c}_{i}.JPEG", quality=90)
    return root


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
