"""Tiny detection data sets in the official layouts, written by the tests themselves."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trainclock.workloads.detection.data.prepare import generate, write_split


def write_layout(root: Path, layout: str, train: int = 6, val: int = 4, side: int = 32, seed: int = 0,
                 categories: int | None = None) -> Path:
    """Mosaics in `layout` ("coco" or "openimages"); with `categories`, the labels list that many
    classes (the full sizes' 264 or 91), of which the mosaics use the first ten."""
    write_split(root, layout, "train", generate(train, side, seed, "train"), 1)
    write_split(root, layout, "val", generate(val, side, seed, "val"), 1000)
    if categories is not None:
        for labels in root.rglob("*.json"):
            data = json.loads(labels.read_text())
            data["categories"] = [{"id": k + 1, "name": f"class {k + 1}"} for k in range(categories)]
            labels.write_text(json.dumps(data))
    return root


def boxes_of(masks: np.ndarray) -> np.ndarray:
    out = []
    for mask in masks:
        ys, xs = np.nonzero(mask)
        out.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    return np.array(out, np.float32)
