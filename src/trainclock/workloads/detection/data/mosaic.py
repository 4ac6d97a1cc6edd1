"""The CPU tiers' data: mosaics of Fashion-MNIST items on textured canvases, generated from a seed.

Each image is a canvas (a random colour, a low-frequency shade and stripes) holding 1-4 items of
random size and colour that do not overlap; an item's instance mask is its own pixels (the resized
item's intensity above a threshold), its box the mask's extent, so boxes and masks are exact. The
images are written losslessly (PNG) with COCO-format labels in the layout the full size reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

MASK_LEVEL = 48  # item pixels at least this bright (of 255) belong to the item: the rest is canvas
MAX_ITEMS = 4


@dataclass
class Mosaic:
    image: np.ndarray  # side x side x 3 uint8
    boxes: list[list[int]]  # [x, y, w, h] in pixels, from the masks
    labels: list[int]  # 0-based Fashion-MNIST classes
    masks: list[np.ndarray]  # side x side bool


def canvas(rng: np.random.Generator, side: int) -> np.ndarray:
    base = rng.uniform(0, 160, size=3)
    y, x = np.mgrid[0:side, 0:side] / side
    shade = np.sin(2 * np.pi * (rng.uniform(0.3, 1.5) * x + rng.uniform(0.3, 1.5) * y + rng.uniform()))
    angle, period = rng.uniform(0, np.pi), rng.uniform(3, 9)
    stripes = (np.sin((x * np.cos(angle) + y * np.sin(angle)) * side * 2 * np.pi / period) > 0)
    texture = base + 25 * shade[..., None] + rng.uniform(5, 30) * stripes[..., None] * rng.uniform(-1, 1, size=3)
    return np.clip(texture + rng.normal(0, 4, size=(side, side, 3)), 0, 255)


def mosaic(rng: np.random.Generator, items: np.ndarray, classes: np.ndarray, side: int) -> Mosaic:
    image = canvas(rng, side)
    taken = np.zeros((side, side), bool)
    out = Mosaic(np.empty(0), [], [], [])
    for _ in range(int(rng.integers(1, MAX_ITEMS + 1))):
        size = int(rng.integers(side // 4, side // 2 + 1))
        for _attempt in range(10):  # place without overlap, or give the item up
            x, y = (int(v) for v in rng.integers(0, side - size + 1, size=2))
            if not taken[y:y + size, x:x + size].any():
                break
        else:
            continue
        k = int(rng.integers(len(items)))
        item = np.asarray(Image.fromarray(items[k]).resize((size, size), Image.BILINEAR), dtype=np.float64)
        mask = np.zeros((side, side), bool)
        mask[y:y + size, x:x + size] = item >= MASK_LEVEL
        if mask.sum() < 4:
            continue
        lit = rng.uniform(90, 255, size=3) * (item / 255.0)[..., None]  # the item's own shading, tinted
        image[y:y + size, x:x + size] = np.where(mask[y:y + size, x:x + size, None], lit, image[y:y + size, x:x + size])
        taken[y:y + size, x:x + size] = True
        ys, xs = np.nonzero(mask)
        out.boxes.append([int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)])
        out.labels.append(int(classes[k]))
        out.masks.append(mask)
    out.image = image.astype(np.uint8)
    return out
