"""DiceCE, the reference's training loss (model/losses.py): the mean of cross-entropy over every
voxel and of (1 - soft Dice) per sample and foreground class (softmax probabilities against the
one-hot labels, background excluded, smoothing 1e-6 on both sides)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from trainclock.workloads.unet3d.model import N_CLASSES

SMOOTH = 1e-6


def dice_ce_loss(logits_NCDHW: torch.Tensor, label_N1DHW: torch.Tensor) -> torch.Tensor:
    logits = logits_NCDHW.float()  # the softmax and sums in fp32 under autocast
    target = label_N1DHW[:, 0].long()
    cross_entropy = F.cross_entropy(logits, target)
    probabilities = torch.softmax(logits, dim=1)[:, 1:]
    # the foreground classes' one-hot by comparison: F.one_hot reads the labels' maximum back to the host
    foreground = torch.arange(1, N_CLASSES, device=target.device).view(1, -1, 1, 1, 1)
    one_hot = (target.unsqueeze(1) == foreground).float()
    dims = (2, 3, 4)
    intersection = (probabilities * one_hot).sum(dims)
    dice = (2 * intersection + SMOOTH) / (probabilities.sum(dims) + one_hot.sum(dims) + SMOOTH)
    return ((1 - dice).mean() + cross_entropy) / 2
