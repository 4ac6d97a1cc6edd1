"""Tiny detection data sets in the official layouts, written by the tests themselves (with the
workload's own sample writer: trainclock.workloads.detection.data.sample)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainclock.workloads.detection.data.sample import write_mosaics
from trainclock.workloads.detection.mask_targets import rasterize


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


def whole_image(outline: dict[str, torch.Tensor], side: int) -> torch.Tensor:
    """Every object's outline (data/outlines.py) rasterised over a side x side image at one cell a
    pixel: its full masks, (objects, side, side) float 0/1."""
    n = len(outline["mask_edges"])
    box = torch.tensor([0.0, 0.0, side, side]).expand(n, 4)
    return rasterize(outline["mask_edges"], box, side)
