"""What the job trains on and evaluates with, whichever data it came from (the tiers' generated
images or the official shards)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class EvalSet:
    """What an evaluation needs: captions (ids), the unconditional ids, how latents become images,
    how images become FID features and CLIP cosines, and the reference statistics."""

    ids: torch.Tensor
    empty_ids: torch.Tensor
    decode: Callable[[torch.Tensor], torch.Tensor]  # latents -> images in [0, 1]
    features: torch.nn.Module  # images -> FID features
    clip_cosine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (images, ids) -> cosine per image
    reference: dict[str, np.ndarray]


@dataclass
class TrainSet:
    # indexed by a tensor of sample numbers: tensors for the tiers, shard readers (data/shard_index.py) for the official data
    latents: torch.Tensor  # N x C x H x W, already scaled (or moments, 2C channels, for the official data)
    ids: torch.Tensor
    moments: bool = False  # the reference's shards hold VAE (mean, logvar): sample a latent per step
