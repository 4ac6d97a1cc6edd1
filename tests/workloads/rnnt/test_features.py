"""The batched torch features (features.py) against the per-utterance numpy pipeline they replaced
(kept here as the reference: np.interp resampling, torch.stft of one utterance with its own reflect
padding, slicing to its own frames), for the same draws, on utterances of different lengths in one
padded batch, with and without augmentation; the draws keep the rules' ranges; the dither's noise
is a pure function of (seed, position); the padding and the batch's other rows change nothing; no
host read, and fp32 under autocast."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainclock.workloads.rnnt.augment import Draws, draw
from trainclock.workloads.rnnt.data.batches import collate
from trainclock.workloads.rnnt.features import (SAMPLE_RATE, SPEED_ONE, FeatureConfig, constants,
                                                dither_noise, features, mel_filters)
from tests.host_reads import HostReads

CONFIG = FeatureConfig()


# --- the reference: one utterance at a time, numpy and torch.stft, as features.py computed it before ---

def speed_perturb(audio: np.ndarray, rate: float) -> np.ndarray:
    n = max(1, int(round(len(audio) / rate)))
    return np.interp(np.arange(n) * rate, np.arange(len(audio)), audio).astype(np.float32)


def log_mel(audio: np.ndarray, config: FeatureConfig, noise: np.ndarray | None) -> torch.Tensor:
    x = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
    if noise is not None:
        x = x + config.dither * torch.from_numpy(noise[:len(x)])
    x = torch.cat([x[:1], x[1:] - config.preemphasis * x[:-1]])
    win, hop = config.window, config.hop
    spec = torch.stft(x, config.n_fft, hop, win, torch.hann_window(win, periodic=False), return_complex=True)
    power = spec.abs().pow(2)
    frames = (len(x) + hop - 1) // hop
    mel = torch.log(mel_filters(config.n_mels, config.n_fft) @ power[:, :frames] + 1e-20)
    mean, std = mel.mean(1, keepdim=True), mel.std(1, keepdim=True) if frames > 1 else torch.zeros_like(mel[:, :1])
    return ((mel - mean) / (std + 1e-5)).T.contiguous()


def stack_frames(feats_TF: torch.Tensor, stacking: int, subsampling: int) -> torch.Tensor:
    T = feats_TF.size(0)
    shifted = [feats_TF] + [torch.nn.functional.pad(feats_TF[n:], (0, 0, 0, min(n, T))) for n in range(1, stacking)]
    return torch.cat(shifted, 1)[::subsampling]


def reference_features(audio: np.ndarray, d: Draws, noise: np.ndarray | None,
                       config: FeatureConfig = CONFIG) -> torch.Tensor:
    x = speed_perturb(audio, d.speed / SPEED_ONE) if d.speed != SPEED_ONE else audio
    feats = log_mel(x, config, noise)
    feats = feats.masked_fill(torch.from_numpy(d.time_mask)[:, None] | torch.from_numpy(d.freq_mask)[None], 0.0)
    return stack_frames(feats, config.stacking, config.subsampling)


# --- utterances ---

def speechlike(seconds: float, seed: int) -> np.ndarray:
    """int16 audio with a changing pitch, noise and a stretch of digital silence (where the dither counts)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    wave = 0.3 * np.sin(2 * np.pi * (150 + 100 * t) * t * (1 + seed)) + 0.02 * rng.standard_normal(len(t))
    wave[len(t) // 3:len(t) // 3 + 800] = 0.0
    return np.round(np.clip(wave, -1, 1) * 32000).astype(np.int16)


def batch_of(audio: list[np.ndarray], train: bool, seed: int = 5) -> tuple[dict[str, torch.Tensor], list[Draws]]:
    draws = [draw(len(a), CONFIG, np.random.default_rng([seed, k]), train) for k, a in enumerate(audio)]
    return collate(audio, draws, [[1, 2]] * len(audio)), draws


def noise_of(d: Draws, width: int) -> np.ndarray:
    table = constants(CONFIG, torch.device("cpu"))[2]
    return dither_noise(torch.tensor([d.dither_seed]), width, table)[0].numpy()


LENGTHS = (0.4, 1.37, 0.9, 2.2)  # seconds: not multiples of a hop, the longest not first


@pytest.mark.parametrize("train", [False, True])
def test_batched_features_equal_the_per_utterance_reference(train):
    audio = [speechlike(s, k) for k, s in enumerate(LENGTHS)]
    batch, draws = batch_of(audio, train)
    feats, lens = features(batch, CONFIG)
    assert feats.dtype == torch.float32 and feats.size(2) == CONFIG.features
    if train:
        assert len({d.speed for d in draws}) == len(draws) and any(d.time_mask.any() for d in draws)
    for i, (a, d) in enumerate(zip(audio, draws)):
        expected = reference_features(a.astype(np.float32) / 32768, d, noise_of(d, d.samples))
        assert int(lens[i]) == expected.size(0)
        # resampled in float32 (the reference: float64), which the log of digital silence amplifies most
        torch.testing.assert_close(feats[i, :expected.size(0)], expected, rtol=0, atol=2e-4 if train else 1e-5)
        assert not feats[i, expected.size(0):].any()  # zeros past each utterance's end


def test_the_draws_keep_the_rules_ranges_and_evaluation_draws_only_the_dither():
    for k in range(50):
        d = draw(16_000 * (1 + k % 5), CONFIG, np.random.default_rng([2, k]), train=True)
        assert 0.85 <= d.speed / SPEED_ONE <= 1.15 and d.samples == round(16_000 * (1 + k % 5) * SPEED_ONE / d.speed)
        assert d.freq_mask.sum() <= CONFIG.freq_masks * CONFIG.freq_max
        assert len(d.time_mask) == -(-d.samples // CONFIG.hop)
        assert d.time_mask.sum() <= CONFIG.time_masks * round(len(d.time_mask) * CONFIG.time_max)
    plain = draw(12_345, CONFIG, np.random.default_rng([0, 7]), train=False)
    assert (plain.speed, plain.samples) == (SPEED_ONE, 12_345) and not plain.freq_mask.any() | plain.time_mask.any()
    assert plain.dither_seed == draw(12_345, CONFIG, np.random.default_rng([0, 7]), train=False).dither_seed


def test_rows_padding_and_neighbours_do_not_change_an_utterances_features():
    audio = [speechlike(s, k) for k, s in enumerate(LENGTHS)]
    whole, _ = batch_of(audio, train=True)
    feats, lens = features(whole, CONFIG)
    for k, a in enumerate(audio):  # alone, with its own draws (the generator of its position)
        d = draw(len(a), CONFIG, np.random.default_rng([5, k]), True)
        alone, alone_lens = features(collate([a], [d], [[1, 2]]), CONFIG)
        assert int(alone_lens[0]) == int(lens[k])
        torch.testing.assert_close(alone[0], feats[k, :alone.size(1)], rtol=0, atol=1e-5)


def test_the_dither_noise_is_white_normal_and_a_function_of_seed_and_position():
    table = constants(CONFIG, torch.device("cpu"))[2]
    seeds = torch.tensor([3, 2**31 - 1, 12345678])
    noise = dither_noise(seeds, 300_000, table)
    assert noise.mean().abs() < 0.01 and (noise.std() - 1).abs() < 0.01
    assert torch.equal(dither_noise(seeds[1:2], 1000, table)[0], noise[1, :1000])  # the width changes nothing
    first = noise[0]
    assert abs(float(torch.corrcoef(torch.stack([first[1:], first[:-1]]))[0, 1])) < 0.01  # white
    assert abs(float(torch.corrcoef(noise[:2])[0, 1])) < 0.01


def test_int16_audio_reads_as_soundfiles_float(tmp_path):
    import soundfile

    audio = speechlike(0.5, 1)
    soundfile.write(str(tmp_path / "a.flac"), audio, SAMPLE_RATE)
    as_float, _ = soundfile.read(str(tmp_path / "a.flac"), dtype="float32")
    assert np.array_equal(as_float, audio.astype(np.float32) * (1.0 / 32768))


def test_the_features_read_nothing_back_and_ignore_autocast():
    batch, _ = batch_of([speechlike(s, k) for k, s in enumerate(LENGTHS)], train=True)
    with HostReads() as reads, torch.autocast("cpu", dtype=torch.bfloat16):
        feats, _ = features(batch, CONFIG)
    assert reads.count == 0 and feats.dtype == torch.float32
