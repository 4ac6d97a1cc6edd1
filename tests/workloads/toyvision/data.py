"""Generated 10-class images: each class is a fixed random 8x8 pattern; a sample is its class's
pattern, shifted by up to one pixel, under Gaussian noise. Learnable, but not in one step."""

from __future__ import annotations

import torch

CLASSES, SIDE = 10, 8
TRAIN_IMAGES, VAL_IMAGES = 4096, 512
DATA_SEED = 1234  # the data are fixed; the run's seed only orders them


def make_split(n: int, split_seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(DATA_SEED)
    prototypes = torch.randn(CLASSES, 1, SIDE, SIDE, generator=g)
    g = torch.Generator().manual_seed(DATA_SEED + split_seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    shifts = torch.randint(-1, 2, (n, 2), generator=g)
    images = torch.stack([torch.roll(prototypes[c], (int(dy), int(dx)), dims=(1, 2))
                          for c, (dy, dx) in zip(labels.tolist(), shifts.tolist())])
    images = images + 1.0 * torch.randn(images.shape, generator=g)
    return {"image": images, "label": labels}


def train_batch(train: dict[str, torch.Tensor], seed: int, step: int, batch: int, rows: slice) -> dict[str, torch.Tensor]:
    """Rows `rows` of step `step`'s global batch: a function of (seed, step) alone, so any rank and
    any resume draws the same rows."""
    g = torch.Generator().manual_seed(seed * 100_003 + step)
    index = torch.randint(0, len(train["label"]), (batch,), generator=g)[rows]
    return {"image": train["image"][index], "label": train["label"][index]}
