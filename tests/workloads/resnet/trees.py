"""Tiny ImageNet-layout JPEG trees that the tests write themselves (the layout is the workload's
own sample writer's: trainclock.workloads.resnet.data.sample)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.workloads.resnet.data import sample


def write_tree(root: Path, classes: int = 2, per_class: int = 4, val_per_class: int = 2, size: tuple[int, int] = (40, 32),
               seed: int = 0) -> Path:
    """root/train/<class>/*.JPEG and root/val/<class>/*.JPEG of random RGB images, each class a tint."""
    rng = np.random.default_rng(seed)

    def pixels(split: str, c: int, i: int) -> np.ndarray:
        image = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        image[..., c % 3] = 255 - c * 40  # a class-specific tint
        return image

    names = [f"n{c:08d}" for c in range(classes)]
    return sample.write_tree(root, names, {"train": [per_class] * classes, "val": [val_per_class] * classes}, pixels)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
