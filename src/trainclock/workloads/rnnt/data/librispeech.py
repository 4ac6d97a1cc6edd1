"""LibriSpeech in its two official shapes: as published (<split>/<speaker>/<chapter>/ folders of
<speaker>-<chapter>-<utt>.flac with a <speaker>-<chapter>.trans.txt of "ID TRANSCRIPT" lines), and
as the reference converts it (wav files listed in JSON manifests: a list of {"transcript",
"original_duration", "files": [{"fname" (relative to the dataset folder), "speed", "duration"}]};
only the speed-1.0 file is used, since speed perturbation happens on line)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.workloads.rnnt.features import SAMPLE_RATE


@dataclass(frozen=True)
class Utterance:
    path: str
    transcript: str  # normalised: lower case, letters, apostrophes and single spaces
    duration: float  # seconds


def normalize(text: str) -> str:
    return " ".join(re.sub(r"[^a-z' ]", " ", text.lower()).split())


def read_tree(folder: Path) -> list[Utterance]:
    """Every utterance of a published LibriSpeech split folder, in sorted order."""
    import soundfile

    transcripts = sorted(folder.glob("*/*/*.trans.txt"))
    if not transcripts:
        raise DataError(f"{folder} holds no LibriSpeech <speaker>/<chapter>/<speaker>-<chapter>.trans.txt; "
                        "pass a split folder such as LibriSpeech/dev-clean")
    utterances = []
    for listing in transcripts:
        for line in listing.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            key, _, text = line.partition(" ")
            audio = listing.parent / f"{key}.flac"
            if not audio.exists():
                raise DataError(f"{audio} is missing ({listing.name} lists {key})")
            try:
                duration = soundfile.info(str(audio)).duration
            except RuntimeError as e:
                raise DataError(f"{audio} is not readable audio ({e})") from None
            utterances.append(Utterance(str(audio), normalize(text), duration))
    return utterances


def read_manifests(data_dir: Path, manifests: list[Path]) -> list[Utterance]:
    """The utterances of the reference's JSON manifests (paths relative to data_dir)."""
    utterances = []
    for manifest in manifests:
        try:
            entries = json.loads(manifest.read_text(encoding="utf-8"))
            for entry in entries:
                original = next(f for f in entry["files"] if float(f.get("speed", 1)) == 1.0)
                utterances.append(Utterance(str(data_dir / original["fname"]), normalize(entry["transcript"]),
                                            float(entry["original_duration"])))
        except (OSError, ValueError, KeyError, TypeError, StopIteration) as e:
            raise DataError(f"{manifest} is not a reference LibriSpeech manifest ({type(e).__name__}: {e})") from None
    return utterances


def read_split(path: Path, data_dir: Path | None = None) -> list[Utterance]:
    """A split given as a LibriSpeech folder or a manifest .json (whose paths are relative to its folder)."""
    if path.suffix == ".json":
        return read_manifests(data_dir or path.parent, [path])
    if not path.is_dir():
        raise DataError(f"{path} is neither a LibriSpeech split folder nor a .json manifest")
    return read_tree(path)


def load_audio(utterance: Utterance) -> np.ndarray:
    """The utterance's samples as int16 at 16 kHz: LibriSpeech's FLAC (and the reference's wav) hold 16-bit
    samples, read exactly at half float32's bytes; features.py scales them to [-1, 1) on the device."""
    import soundfile

    try:
        audio, rate = soundfile.read(utterance.path, dtype="int16", always_2d=False)
    except (RuntimeError, OSError) as e:
        raise DataError(f"{utterance.path} is not readable audio ({e})") from None
    if rate != SAMPLE_RATE:
        raise DataError(f"{utterance.path} is sampled at {rate} Hz; LibriSpeech is 16 kHz")
    return audio if audio.ndim == 1 else audio.mean(1).astype(np.int16)
