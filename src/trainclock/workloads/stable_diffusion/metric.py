"""FID and CLIP score, as the reference scores its generated images (ldm/modules/fid/fid_score.py
against the COCO-2014 reference statistics; CLIP score as open_clip's mean cosine between each
image and its caption, not torchmetrics' 100 x max(cos, 0)). Each data-parallel rank generates and
embeds its share of the captions; the features are gathered over ranks (FID needs the whole set's
mean and covariance) and the cosines summed, so both are over the whole evaluation set."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from trainclock.workload.base import EvalShard

FID, CLIP = "FID", "CLIP"  # the names the official logs give in metadata "metric"


class _Features(nn.Module):
    """Hands precomputed features to torchmetrics' FID unchanged."""

    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return features


def fid(generated_NxD: torch.Tensor, reference_mu: np.ndarray, reference_sigma: np.ndarray,
        reference_count: int) -> float:
    """FID of generated features against reference statistics (mu, sigma of the real images), by
    torchmetrics' FrechetInceptionDistance with the statistics loaded as its real-image sums."""
    # imported when scored: torchmetrics imports all its domains (transformers, scipy), and the
    # registry imports this module for every command
    from torchmetrics.image.fid import FrechetInceptionDistance

    d = generated_NxD.shape[1]
    metric = FrechetInceptionDistance(feature=_Features(d), normalize=False, reset_real_features=False)
    metric.set_dtype(torch.float64)
    mu = torch.as_tensor(reference_mu, dtype=torch.float64)
    sigma = torch.as_tensor(reference_sigma, dtype=torch.float64)
    metric.real_features_sum = mu * reference_count
    metric.real_features_cov_sum = sigma * (reference_count - 1) + reference_count * torch.outer(mu, mu)
    metric.real_features_num_samples = torch.tensor(reference_count)
    metric.update(generated_NxD.to(torch.float64), real=False)
    return float(metric.compute())


def score(stats: EvalShard, reference: dict[str, np.ndarray]) -> dict[str, float]:
    features = torch.cat([torch.as_tensor(f) for f in stats.gathered])
    clip = float(stats.sums["cosine_sum"] / stats.sums["images"].clamp(min=1))
    return {FID: fid(features, reference["mu"], reference["sigma"], int(reference.get("count", 30_000))), CLIP: clip}


def fid_direct(a_NxD: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> float:
    """The textbook formula (pytorch-fid's calculate_frechet_distance), for the tests."""
    from scipy import linalg

    mu1, sigma1 = a_NxD.mean(0), np.cov(a_NxD, rowvar=False)
    covmean, _ = linalg.sqrtm(sigma1.dot(sigma), disp=False)
    diff = mu1 - mu
    return float(diff.dot(diff) + np.trace(sigma1) + np.trace(sigma) - 2 * np.trace(covmean.real))
