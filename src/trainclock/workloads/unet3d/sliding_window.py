"""Whole-volume inference as the reference does it (runtime/inference.py): crop a border smaller
than half a stride, pad (constant -2.2, below every normalised intensity) to whole strides, run the
model on every window of the patch shape at stride patch x (1 - overlap), weight each window's
logits by a Gaussian (sigma 1/8 of the patch, cube-rooted, max 1), divide by the summed weights,
and cut the padding off again. Windows go through the model a few at a time (`batch`): the same
result as the reference's one at a time, with fewer, larger convolutions."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

PADDING_VALUE = -2.2


def gaussian_weights(n: int) -> torch.Tensor:
    """The reference's gaussian_kernel(n, 0.125 * n): scipy.signal.windows.gaussian, outer product, cube root."""
    std = 0.125 * n
    g = np.exp(-0.5 * ((np.arange(n) - (n - 1) / 2) / std) ** 2)
    cube = np.cbrt(np.einsum("i,j,k->ijk", g, g, g))
    return torch.from_numpy(cube / cube.max())


def crop_and_pad(volume: torch.Tensor, label: torch.Tensor, roi: tuple[int, ...],
                 strides: list[int]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    shape = list(volume.shape[2:])
    bounds = [s % st for s, st in zip(shape, strides)]
    bounds = [b if b < st // 2 else 0 for b, st in zip(bounds, strides)]
    cut = tuple(slice(b // 2, s - (b - b // 2)) for b, s in zip(bounds, shape))
    volume, label = volume[(..., *cut)], label[(..., *cut)]
    shape = list(volume.shape[2:])
    pads = [(st - s % st) % st for s, st in zip(shape, strides)]
    pads = [p if s + p >= r else p + st for p, s, r, st in zip(pads, shape, roi, strides)]
    paddings = [pads[2] // 2, pads[2] - pads[2] // 2, pads[1] // 2, pads[1] - pads[1] // 2, pads[0] // 2, pads[0] - pads[0] // 2]
    return F.pad(volume, paddings, mode="constant", value=PADDING_VALUE), label, paddings


def sliding_window(model: Callable[[torch.Tensor], torch.Tensor], volume_11DHW: torch.Tensor,
                   label_11DHW: torch.Tensor, roi: tuple[int, int, int], overlap: float = 0.5, batch: int = 4,
                   n_class: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits 1 x n_class x D'H'W', label 1 x 1 x D'H'W') over the (border-cropped) volume."""
    strides = [int(r * (1 - overlap)) for r in roi]
    volume, label, paddings = crop_and_pad(volume_11DHW, label_11DHW, roi, strides)
    cropped = list(label.shape[2:])
    padded = volume.shape[2:]
    counts = [(p - r) // st + 1 for p, r, st in zip(padded, roi, strides)]
    corners = list(itertools.product(*(range(0, st * c, st) for st, c in zip(strides, counts))))
    weight = gaussian_weights(roi[0]).to(volume.dtype).to(volume.device)
    result = torch.zeros((1, n_class, *padded), dtype=torch.float32, device=volume.device)
    norm = torch.zeros((1, 1, *padded), dtype=torch.float32, device=volume.device)
    for start in range(0, len(corners), batch):
        group = corners[start:start + batch]
        windows = [tuple(slice(c, c + r) for c, r in zip(corner, roi)) for corner in group]
        logits = model(torch.cat([volume[(..., *w)] for w in windows])).float()
        for i, w in enumerate(windows):
            result[(..., *w)] += logits[i:i + 1] * weight
            norm[(..., *w)] += weight
    result /= norm
    keep = tuple(slice(p, p + s) for p, s in zip((paddings[4], paddings[2], paddings[0]), cropped))
    return result[(..., *keep)], label
