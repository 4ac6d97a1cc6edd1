"""Tiny detection data sets in the official layouts, written by the tests themselves (with the
workload's own sample writer: trainclock.workloads.detection.data.sample)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.workloads.detection.data.sample import write_mosaics


def write_layout(root: Path, layout: str, train: int = 6, val: int = 4, side: int = 32, seed: int = 0,
                 categories: int | None = None) -> Path:
    """Mosaics in `layout` ("coco" or "openimages"); with `categories`, the labels list that many
    classes (the full sizes' 264 or 91), of which the mosaics use the first ten."""
    return write_mosaics(root, layout, train, val, side, seed, categories)


def boxes_of(masks: np.ndarray) -> np.ndarray:
    out = []
    for mask in masks:
        ys, xs = np.nonzero(mask)
        out.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    return np.array(out, np.float32)
