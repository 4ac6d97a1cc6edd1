"""An utterance's augmentation draws, made on the host from the generator the caller seeds per
utterance (np.random.default_rng([seed, step, position]) in training), so a batch is the same
whatever the number of processes; features.py applies them on the device. In the order drawn:
the speed rate, the dither noise's seed, SpecAugment's frequency masks then its time masks (whose
positions depend on the utterance's frame count after speed perturbation, known here from its
length alone)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainclock.workloads.rnnt.features import SPEED_ONE, FeatureConfig


@dataclass(frozen=True)
class Draws:
    speed: int  # the rate in units of 2^-32 (SPEED_ONE is 1.0): sample positions j * rate are exact integers
    samples: int  # the utterance's length after speed perturbation
    dither_seed: int
    freq_mask: np.ndarray  # (n_mels,) bool: the mel channels SpecAugment zeroes
    time_mask: np.ndarray  # (frames,) bool: the (unstacked) frames SpecAugment zeroes


def frames(samples: int, config: FeatureConfig) -> int:
    """Feature frames of an utterance of `samples` samples: ceil(samples / hop), as the reference counts."""
    return -(-samples // config.hop)


def draw(samples: int, config: FeatureConfig, rng: np.random.Generator, train: bool) -> Draws:
    """The draws of an utterance of `samples` samples; without `train` only the dither's seed."""
    speed = SPEED_ONE
    if train:
        speed = round(float(rng.uniform(config.speed_min, config.speed_max)) * SPEED_ONE)
    # np.interp's length for the rate: float64 division, as the numpy resampler this replaces
    resampled = max(1, int(round(samples / (speed / SPEED_ONE))))
    dither_seed = int(rng.integers(2**31))
    T, F = frames(resampled, config), config.n_mels
    freq_mask, time_mask = np.zeros(F, dtype=bool), np.zeros(T, dtype=bool)
    if train:
        for _ in range(config.freq_masks):
            w = int(rng.integers(config.freq_min, config.freq_max + 1))
            f0 = int(rng.integers(0, max(1, F - w + 1)))
            freq_mask[f0:f0 + w] = True
        # adaptive masking: the widest time mask is a fraction of the utterance's frames
        max_time = int(round(T * config.time_max)) if 0 < config.time_max < 1 else int(config.time_max)
        for _ in range(config.time_masks):
            w = int(rng.integers(config.time_min, max(config.time_min, max_time) + 1))
            t0 = int(rng.integers(0, max(1, T - w + 1)))
            time_mask[t0:t0 + w] = True
    return Draws(speed, resampled, dither_seed, freq_mask, time_mask)
