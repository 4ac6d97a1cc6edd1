"""Audio to the encoder's input, as the reference computes it (common/data/features.py and the
config baseline_v3-1023sp.yaml): 16 kHz audio, dither 1e-5, pre-emphasis 0.97, torch.stft with a
20 ms Hann window (320 samples, n_fft 512) every 10 ms, power spectrum through 80 Slaney mel
filters (librosa's default, rebuilt here: librosa is not installed), log, per-feature
normalisation over the utterance's frames, then 3 frames stacked and every 3rd kept (240 features
per 30 ms). Training adds speed perturbation (a resampling by a rate in [0.85, 1.15], linear
interpolation) before and SpecAugment after the features (2 frequency masks of 0-20 mels, 10 time
masks of up to 3% of the frames).

`features` computes a whole padded batch at once in torch, on whatever device the batch is on,
with every per-utterance length a tensor (masks, never slicing) and no read back to the host. Its
randomness is drawn on the host (augment.py) from a generator seeded per utterance; the dither
noise is a pure function of (the utterance's seed, the sample's position), so every rank and
device computes the same features for an utterance."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import torch

from trainclock.errors import DataError

SAMPLE_RATE = 16_000
SPEED_ONE = 1 << 32  # a speed rate of 1.0 in the batches' fixed point
NOISE_OFFSETS = 1 << 22  # where an utterance's dither noise can start in the table of normals
NOISE_WIDTH = 1 << 21  # the longest utterance's samples the table serves (131 s; LibriSpeech's longest: 35 s)


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

    @property
    def window(self) -> int:
        return int(SAMPLE_RATE * self.window_s)

    @property
    def hop(self) -> int:
        return int(SAMPLE_RATE * self.hop_s)


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


@cache  # per device: the constants are copied there once, not on every step
def constants(config: FeatureConfig, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mel filters, Hann window, the dither's table of standard normals) on `device`."""
    table = torch.randn(NOISE_OFFSETS + NOISE_WIDTH, generator=torch.Generator().manual_seed(0))  # same everywhere
    return (mel_filters(config.n_mels, config.n_fft).to(device),
            torch.hann_window(config.window, periodic=False).to(device), table.to(device))


def speed_perturb(audio_BL: torch.Tensor, lens_B: torch.Tensor, speed_B: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) each utterance played speed/SPEED_ONE times faster: sample j is the input at j * rate,
    linearly interpolated (np.interp's resampling, the last sample held past the end). j * speed is an
    exact integer, so the positions are np.interp's float64 ones exactly (below 2^53: j < 2^20, 65 s)."""
    B, L = audio_BL.shape
    # a sample and the next one packed as one 64-bit element: one gather reads both interpolation ends
    ext = torch.nn.functional.pad(audio_BL, (0, 1))
    pairs = torch.stack([ext[:, :-1], ext[:, 1:]], -1).view(torch.int64).squeeze(-1)
    # the last sample held past the end: the only pair a position before n_B reads beyond the audio
    last = (lens_B - 1)[:, None]
    held = audio_BL.gather(1, last)
    pairs.scatter_(1, last, torch.stack([held, held], -1).view(torch.int64).squeeze(-1))
    pos = torch.arange(width, device=audio_BL.device)[None] * speed_B[:, None]
    ends = pairs.gather(1, (pos >> 32).clamp_(max=L - 1)).view(torch.float32).view(B, width, 2)
    return torch.lerp(ends[..., 0], ends[..., 1], (pos & (SPEED_ONE - 1)).float().mul_(1.0 / SPEED_ONE))


def dither_noise(seeds_B: torch.Tensor, width: int, table: torch.Tensor) -> torch.Tensor:
    """(B, width) standard normal noise, a pure function of (seed, position): each utterance reads
    the fixed table of normals from an offset its seed picks (rows of a sliding-window view: one
    copy, where a hash-based normal costs tens of integer passes). White within an utterance;
    different utterances may read overlapping stretches, which a dither of 1e-5 does not notice."""
    if width > NOISE_WIDTH:
        raise DataError(f"an utterance of {width / SAMPLE_RATE:.0f} s is longer than the features' dither serves "
                        f"({NOISE_WIDTH / SAMPLE_RATE:.0f} s): cut the recording into shorter utterances")
    windows = table.as_strided((NOISE_OFFSETS, width), (1, 1))
    return windows.index_select(0, seeds_B % NOISE_OFFSETS)


def emphasized_padded(x_BW: torch.Tensor, n_B: torch.Tensor, config: FeatureConfig) -> torch.Tensor:
    """(B, pad + W + pad): each utterance pre-emphasised, then reflect-padded by pad = n_fft // 2 at
    its start and at its own end n_B, as torch.stft(center=True) pads an utterance alone (the end's
    reflection written over the padding; what lies past it is never read by the utterance's frames).
    One buffer written in place: on a CPU, every pass over a batch's samples shows in the step."""
    (B, W), pad = x_BW.shape, config.n_fft // 2
    padded = x_BW.new_empty(B, pad + W + pad)
    body = padded[:, pad:pad + W]
    body[:, :1] = x_BW[:, :1]
    # x[j] - (0.97 x[j-1]) rounded as two operations, as the reference: a fused multiply-add's
    # rounding moves the lowest mel band, which pre-emphasis all but cancels, by 1e-4
    body[:, 1:] = x_BW[:, :-1]
    body[:, 1:].mul_(-config.preemphasis).add_(x_BW[:, 1:])
    padded[:, :pad] = body[:, 1:pad + 1].flip(1)
    padded[:, pad + W:] = 0.0
    k = torch.arange(pad, device=x_BW.device)
    tail = body.gather(1, (n_B[:, None] - 2 - k[None]).clamp(0, W - 1))
    return padded.scatter_(1, pad + n_B[:, None] + k[None], tail)


def log_mel(x_BW: torch.Tensor, n_B: torch.Tensor, frames: int, config: FeatureConfig,
            filters: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """(B, n_mels, frames) log-mel power of each utterance's first n_B samples, pre-emphasised
    (valid up to its own frames)."""
    padded = emphasized_padded(x_BW, n_B, config)[:, :(frames - 1) * config.hop + config.n_fft]
    spec = torch.stft(padded, config.n_fft, config.hop, config.window, window, center=False, return_complex=True)
    parts = torch.view_as_real(spec)
    power = parts[..., 0].square() + parts[..., 1].square()  # a sum over the pair's axis is several times slower
    return torch.log(filters @ power + 1e-20)


def normalize(mel_BFT: torch.Tensor, valid_BT: torch.Tensor) -> torch.Tensor:
    """Each mel channel to zero mean and unit (unbiased) deviation over the utterance's own frames."""
    count = valid_BT.sum(1)[:, None, None]
    valid = valid_BT[:, None, :]
    mean = torch.where(valid, mel_BFT, 0.0).sum(-1, keepdim=True) / count
    centred = torch.where(valid, mel_BFT - mean, 0.0)
    std = (centred.pow(2).sum(-1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()  # 0 for one frame
    return (mel_BFT - mean) / (std + 1e-5)


def stack_frames(feats_BTF: torch.Tensor, stacking: int, subsampling: int) -> torch.Tensor:
    """Each kept frame with the next stacking-1 ones (the caller zeroes frames past an utterance's
    end, so they read zeros there, as it would alone), every subsampling-th."""
    T = feats_BTF.size(1)
    shifted = [feats_BTF] + [torch.nn.functional.pad(feats_BTF[:, n:], (0, 0, 0, min(n, T))) for n in range(1, stacking)]
    return torch.cat(shifted, 2)[:, ::subsampling]


def features(batch: dict[str, torch.Tensor], config: FeatureConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """(feats_BTF, feat_lens_B): the encoder's input for a batch of raw audio (data/batches.py's keys),
    in fp32 whatever the caller's autocast, without gradients (the features are the network's input)."""
    audio = batch["audio"]
    with torch.no_grad(), torch.autocast(audio.device.type, enabled=False):
        filters, window, table = constants(config, audio.device)
        n = batch["samples"]
        T = (n + config.hop - 1) // config.hop  # the reference's frame count, ceil(samples / hop)
        frames = batch["time_mask"].size(1)  # the rows' most frames: a shape, so no read of T
        x = audio.float().mul_(1.0 / 32768)  # int16 full scale, as soundfile reads 16-bit audio as float
        # the frames' samples, and at least a window, so the start's reflection has samples to read
        x = speed_perturb(x, batch["audio_lens"], batch["speed"], max(frames * config.hop, config.n_fft))
        x.add_(dither_noise(batch["dither_seeds"], x.size(1), table), alpha=config.dither)
        valid = torch.arange(frames, device=audio.device)[None] < T[:, None]
        feats = normalize(log_mel(x, n, frames, config, filters, window), valid).transpose(1, 2)
        hidden = ~valid[..., None] | batch["time_mask"][..., None] | batch["freq_mask"][:, None, :]
        feats = stack_frames(feats.masked_fill(hidden, 0.0), config.stacking, config.subsampling)
        return feats, (T + config.subsampling - 1) // config.subsampling
