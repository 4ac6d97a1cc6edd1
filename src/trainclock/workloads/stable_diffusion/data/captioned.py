"""The CPU tiers' text-to-image data: a Fashion-MNIST item, tinted one of a few colours, placed in
one quadrant of a 32 x 32 black canvas, captioned "a <colour> <item> at the <place>". Everything
depends on the item's index and a fixed seed, never on the run's seed."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from trainclock.datasets.fashion_mnist import CLASSES, load_split

SIDE = 32  # canvas side (pixels)
ITEM = SIDE // 2  # the item's side once downscaled from 28: it fills its quadrant
COLOURS = {"red": (1.0, 0.25, 0.2), "green": (0.3, 1.0, 0.3), "blue": (0.3, 0.45, 1.0), "yellow": (1.0, 0.9, 0.2)}
PLACES = {"top left": (0, 0), "top right": (0, 1), "bottom left": (1, 0), "bottom right": (1, 1)}
WORDS = tuple(dict.fromkeys(("a", "at", "the", *CLASSES, *COLOURS, *(w for p in PLACES for w in p.split()))))


def attributes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(colour index, place index) of items 0..n-1."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, len(COLOURS), n), rng.integers(0, len(PLACES), n)


def caption(item: int, colour: int, place: int) -> str:
    return f"a {list(COLOURS)[colour]} {CLASSES[item]} at the {list(PLACES)[place]}"


def render(items_N28x28: np.ndarray, colours_N: np.ndarray, places_N: np.ndarray) -> torch.Tensor:
    """Images N x 3 x SIDE x SIDE in [0, 1]."""
    gray = torch.from_numpy(items_N28x28.astype(np.float32) / 255.0)[:, None]
    small = F.interpolate(gray, size=(ITEM, ITEM), mode="area")
    tint = torch.tensor(list(COLOURS.values()))[torch.from_numpy(colours_N).long()][:, :, None, None]
    images = torch.zeros(len(gray), 3, SIDE, SIDE)
    offsets = list(PLACES.values())
    for i, p in enumerate(places_N):
        row, col = offsets[int(p)]
        images[i, :, row * ITEM:(row + 1) * ITEM, col * ITEM:(col + 1) * ITEM] = small[i] * tint[i]
    return images


def generate(split: str, n: int, seed: int) -> tuple[torch.Tensor, list[str], np.ndarray]:
    """(images, captions, labels n x 3 [item, colour, place]) of the first n items of a split."""
    items, labels = load_split(split)
    if n > len(items):
        raise ValueError(f"{split} has {len(items)} Fashion-MNIST items, {n} asked")
    colours, places = attributes(n, seed)
    images = render(items[:n], colours, places)
    captions = [caption(int(labels[i]), int(colours[i]), int(places[i])) for i in range(n)]
    return images, captions, np.stack([labels[:n].astype(np.int64), colours, places], axis=1)
