"""LibriSpeech as published (FLAC + .trans.txt) and the reference's wav + JSON manifests, on tiny
trees written here; the features as the reference computes them; bad files as one DataError line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from trainclock.errors import DataError
from trainclock.workloads.rnnt.data.librispeech import load_audio, read_split
from trainclock.workloads.rnnt.data.prepare import prepare_official
from trainclock.workloads.rnnt.data.sample import write_tree as write_utterances
from trainclock.workloads.rnnt.augment import draw
from trainclock.workloads.rnnt.data.batches import collate
from trainclock.workloads.rnnt.features import FeatureConfig, features, mel_filters

RATE = 16_000


def tone(seconds: float, hz: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def write_tree(root: Path, split: str, texts: dict[str, str]) -> None:
    """<root>/<split>/<speaker>/<chapter>/<key>.flac and <speaker>-<chapter>.trans.txt, keys 'spk-ch-utt'."""
    write_utterances(root, split, {key: (tone(0.5 + 0.25 * i, 300 + 100 * i), text)
                                   for i, (key, text) in enumerate(texts.items())})


def test_published_librispeech_tree_is_read_with_normalised_transcripts(tmp_path):
    write_tree(tmp_path, "dev-clean", {"84-121123-0000": "GO DO YOU HEAR", "84-121123-0001": "BUT IN LESS THAN FIVE",
                                       "174-50561-0000": "FORGOTTEN TOO THE NAME OF GILLIAN'S LOVER"})
    utterances = read_split(tmp_path / "dev-clean")
    assert [u.transcript for u in utterances] == ["forgotten too the name of gillian's lover", "go do you hear",
                                                  "but in less than five"]
    assert utterances[1].duration == pytest.approx(0.5) and load_audio(utterances[1]).dtype == np.int16


def test_reference_manifests_point_at_the_speed_one_wav(tmp_path):
    wav = tmp_path / "dev-clean-wav" / "84" / "121123"
    wav.mkdir(parents=True)
    soundfile.write(str(wav / "84-121123-0000.wav"), tone(1.0, 440), RATE)
    manifest = [{"transcript": "go do you hear", "original_duration": 1.0, "original_num_samples": RATE,
                 "files": [{"fname": "dev-clean-wav/84/121123/84-121123-0000-1.1.wav", "speed": 1.1, "duration": 0.9},
                           {"fname": "dev-clean-wav/84/121123/84-121123-0000.wav", "speed": 1, "duration": 1.0}]}]
    (tmp_path / "librispeech-dev-clean-wav.json").write_text(json.dumps(manifest))
    (utterance,) = read_split(tmp_path / "librispeech-dev-clean-wav.json")
    assert utterance.transcript == "go do you hear" and utterance.path.endswith("84-121123-0000.wav")
    assert load_audio(utterance).shape == (RATE,)


def test_official_folder_finds_its_splits_and_trains_the_sentencepiece_model_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCLOCK_HOME", str(tmp_path / "home"))
    words = "one two three four five six seven eight nine ten red green blue".split()
    write_tree(tmp_path / "ls", "train-clean-100",
               {f"1-2-{i:04d}": " ".join(words[(i + k) % len(words)] for k in range(3)).upper() for i in range(12)})
    write_tree(tmp_path / "ls", "dev-clean", {"3-4-0000": "ONE TWO"})
    corpus = prepare_official(tmp_path / "ls", vocab=20)
    assert len(corpus.train) == 12 and len(corpus.eval) == 1 and corpus.sentencepiece.is_file()
    with pytest.raises(DataError, match="needs dev-clean"):
        prepare_official(tmp_path / "ls" / "train-clean-100", vocab=20)


def test_bad_files_are_one_data_error_line(tmp_path):
    folder = tmp_path / "dev-clean" / "1" / "2"
    folder.mkdir(parents=True)
    (folder / "1-2.trans.txt").write_text("1-2-0000 HELLO\n")
    with pytest.raises(DataError, match="1-2-0000.flac is missing"):
        read_split(tmp_path / "dev-clean")
    (folder / "1-2-0000.flac").write_bytes(b"not audio")
    with pytest.raises(DataError, match="not readable audio"):
        read_split(tmp_path / "dev-clean")
    (tmp_path / "bad.json").write_text('[{"transcript": "x"}]')
    with pytest.raises(DataError, match="not a reference LibriSpeech manifest"):
        read_split(tmp_path / "bad.json")


def test_features_follow_the_reference_pipeline():
    config = FeatureConfig(stacking=1, subsampling=1)
    audio = np.round(tone(1.0, 1000.0) * 32768).astype(np.int16)

    def feats(config: FeatureConfig, train: bool, seed: int = 0) -> torch.Tensor:
        d = draw(len(audio), config, np.random.default_rng(seed), train)
        return features(collate([audio], [d], [[0]]), config)[0][0]

    mel = feats(config, train=False)
    assert mel.shape == (100, 80)  # ceil(16000 / 160) frames of 80 mels
    torch.testing.assert_close(mel.mean(0), torch.zeros(80), atol=1e-4, rtol=0)  # normalised per feature
    filters = mel_filters(80, 512)
    # a 1 kHz tone lands in the filter centred near 1 kHz (mel 15 on Slaney's scale)
    centres = (filters * torch.arange(257)).sum(1) / filters.sum(1) * RATE / 512
    assert abs(float(centres[int(filters[:, 32].argmax())]) - 1000) < 60
    stacked = feats(FeatureConfig(), train=False)
    assert stacked.shape == (34, 240) and torch.equal(stacked[0, 80:160], mel[1])
    assert torch.equal(stacked[-1, 80:], torch.zeros(160))  # past the end: zeros, as the reference pads
    masked = feats(FeatureConfig(stacking=1, subsampling=1, speed_min=1.0, speed_max=1.0), train=True)
    assert (masked == 0).all(0).sum() >= 1 and (masked == 0).all(1).sum() >= 1  # mel channels and frames masked
    train = feats(FeatureConfig(), train=True, seed=1)
    assert 0.85 * 34 - 1 <= train.shape[0] <= 1.15 * 34 + 1 and train.shape[1] == 240
