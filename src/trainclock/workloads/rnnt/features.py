"""Audio to the encoder's input, as the reference computes it (common/data/features.py and the
config baseline_v3-1023sp.yaml): 16 kHz audio, dither 1e-5, pre-emphasis 0.97, torch.stft with a
20 ms Hann window (320 samples, n_fft 512) every 10 ms, power spectrum through 80 Slaney mel
filters (librosa's default, rebuilt here: librosa is not installed), log, per-feature
normalisation over the utterance's frames, then 3 frames stacked and every 3rd kept (240 features
per 30 ms). Training adds speed perturbation (a resampling by a rate in [0.85, 1.15]) before and
SpecAugment after the features (2 frequency masks of 0-20 mels, 10 time masks of up to 3% of the
frames). Randomness comes from a generator the caller seeds per utterance, so a batch is the same
whatever the number of processes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class FeatureConfig:
    n_mels: int = 80
    window_s: float = 0.02
    hop_s: float = 0.01
    n_fft: int = 512
    dither: float = 1e-5
    preemphasis: float = 0.97
    stacking: int = 3
    subsampling: int = 3
    speed_min: float = 0.85
    speed_max: float = 1.15
    freq_masks: int = 2
    freq_min: int = 0
    freq_max: int = 20
    time_masks: int = 10
    time_min: int = 0
    time_max: float = 0.03  # a fraction of the utterance's frames (adaptive masking)

    @property
    def features(self) -> int:
        return self.n_mels * self.stacking


@cache
def mel_filters(n_mels: int, n_fft: int, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """(n_mels, n_fft // 2 + 1) triangular filters on the Slaney mel scale, area-normalised."""
    def hz_to_mel(f):
        f = np.asarray(f, dtype=np.float64)
        return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), f / (200.0 / 3))

    def mel_to_hz(m):
        return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), m * (200.0 / 3))

    freqs = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper)) * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return torch.from_numpy(weights.astype(np.float32))


def speed_perturb(audio: np.ndarray, rate: float) -> np.ndarray:
    """The utterance played `rate` times faster (linear interpolation), as a resampling does."""
    n = max(1, int(round(len(audio) / rate)))
    return np.interp(np.arange(n) * rate, np.arange(len(audio)), audio).astype(np.float32)


def log_mel(audio: np.ndarray, config: FeatureConfig, rng: np.random.Generator | None) -> torch.Tensor:
    """(frames, n_mels) normalised log-mel features of one utterance."""
    x = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
    if config.dither > 0 and rng is not None:
        x = x + config.dither * torch.from_numpy(rng.standard_normal(len(x)).astype(np.float32))
    x = torch.cat([x[:1], x[1:] - config.preemphasis * x[:-1]])
    win = int(SAMPLE_RATE * config.window_s)
    hop = int(SAMPLE_RATE * config.hop_s)
    spec = torch.stft(x, config.n_fft, hop, win, torch.hann_window(win, periodic=False), return_complex=True)
    power = spec.abs().pow(2)
    frames = (len(x) + hop - 1) // hop  # the reference counts ceil(samples / hop) frames
    mel = torch.log(mel_filters(config.n_mels, config.n_fft) @ power[:, :frames] + 1e-20)
    mean, std = mel.mean(1, keepdim=True), mel.std(1, keepdim=True) if frames > 1 else torch.zeros_like(mel[:, :1])
    return ((mel - mean) / (std + 1e-5)).T.contiguous()


def spec_augment(feats_TF: torch.Tensor, config: FeatureConfig, rng: np.random.Generator) -> torch.Tensor:
    T, F = feats_TF.shape
    mask = torch.zeros(T, F, dtype=torch.bool)
    for _ in range(config.freq_masks):
        w = int(rng.integers(config.freq_min, config.freq_max + 1))
        f0 = int(rng.integers(0, max(1, F - w + 1)))
        mask[:, f0:f0 + w] = True
    max_time = int(round(T * config.time_max)) if 0 < config.time_max < 1 else int(config.time_max)
    for _ in range(config.time_masks):
        w = int(rng.integers(config.time_min, max(config.time_min, max_time) + 1))
        t0 = int(rng.integers(0, max(1, T - w + 1)))
        mask[t0:t0 + w] = True
    return feats_TF.masked_fill(mask, 0.0)


def stack_frames(feats_TF: torch.Tensor, stacking: int, subsampling: int) -> torch.Tensor:
    """Each kept frame with the next stacking-1 ones (zeros past the end), every subsampling-th."""
    T = feats_TF.size(0)
    shifted = [feats_TF] + [torch.nn.functional.pad(feats_TF[n:], (0, 0, 0, min(n, T))) for n in range(1, stacking)]
    return torch.cat(shifted, 1)[::subsampling]


def utterance_features(audio: np.ndarray, config: FeatureConfig, rng: np.random.Generator | None,
                       train: bool) -> torch.Tensor:
    """(frames, features) encoder input of one utterance; `train` adds the augmentations."""
    if train and rng is not None:
        audio = speed_perturb(audio, float(rng.uniform(config.speed_min, config.speed_max)))
    feats = log_mel(audio, config, rng)
    if train and rng is not None:
        feats = spec_augment(feats, config, rng)
    return stack_frames(feats, config.stacking, config.subsampling)
