"""LibriSpeech in its two official shapes: as published (<split>/<speaker>/<chapter>/ folders of
<speaker>-<chapter>-<utt>.flac with a <speaker>-<chapter>.trans.txt of "ID TRANSCRIPT" lines), and
as the reference converts it (wav files listed in JSON manifests: a list of {"transcript",
"original_duration", "files": [{"fname" (relative to the dataset folder), "speed", "duration"}]};
only the speed-1.0 file is used, since speed perturbation happens on line)."""

from __future__ import annotations

import json
import math
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
        try:
            text_lines = listing.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as e:
            raise DataError(f"{listing} is not UTF-8 text (byte {e.start}); LibriSpeech's transcripts are UTF-8 "
                            "\"ID TRANSCRIPT\" lines: re-copy or re-encode the file") from None
        except OSError as e:
            raise DataError(f"cannot read {listing} ({e.strerror})") from None
        for line in text_lines:
            if not line.strip():
                continue
            key, _, text = line.partition(" ")
            audio = listing.parent / f"{key}.flac"
            if not audio.exists():
                raise DataError(f"{audio} is missing ({listing.name} lists {key})")
            try:
                duration = soundfile.info(str(audio)).duration
            except (RuntimeError, OSError, ValueError, TypeError) as e:
                raise DataError(f"{audio} is not readable audio ({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})") from None
            utterances.append(Utterance(str(audio), normalize(text), duration))
    return utterances


def read_manifests(data_dir: Path, manifests: list[Path]) -> list[Utterance]:
    """The utterances of the reference's JSON manifests (paths relative to data_dir); every entry
    checked now, its speed-1.0 file included, so a bad one stops the run before it starts."""
    utterances = []
    for manifest in manifests:
        hint = (f"{manifest} is not a reference LibriSpeech manifest (a JSON list of {{\"transcript\", "
                "\"original_duration\", \"files\": [{\"fname\", \"speed\", \"duration\"}]}})")
        try:
            entries = json.loads(manifest.read_text(encoding="utf-8"))
        except UnicodeDecodeError as e:
            raise DataError(f"{manifest} is not UTF-8 text (byte {e.start}); re-create the manifest") from None
        except OSError as e:
            raise DataError(f"cannot read manifest {manifest} ({e.strerror})") from None
        except ValueError as e:
            raise DataError(f"{manifest} is not valid JSON ({e}); re-create the manifest") from None
        if not isinstance(entries, list):
            raise DataError(f"{hint}: it holds a JSON {type(entries).__name__}")
        for number, entry in enumerate(entries):
            where = f"{hint}: entry {number}"
            if not isinstance(entry, dict):
                raise DataError(f"{where} is {json.dumps(entry)[:60]}, not an object")
            transcript, files = entry.get("transcript"), entry.get("files")
            if not isinstance(transcript, str):
                raise DataError(f"{where} has transcript {json.dumps(transcript)[:60]}, not a string")
            if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
                raise DataError(f"{where} has files {json.dumps(files)[:60]}, not a list of "
                                "{\"fname\", \"speed\", \"duration\"} objects")
            try:
                duration = float(entry["original_duration"])
                original = next(f for f in files if float(f.get("speed", 1)) == 1.0)
            except KeyError:
                raise DataError(f"{where} has no original_duration") from None
            except (TypeError, ValueError):
                raise DataError(f"{where} has a duration or speed that is not a number") from None
            except StopIteration:
                raise DataError(f"{where} lists no file of speed 1.0") from None
            if not math.isfinite(duration) or duration < 0:
                raise DataError(f"{where} has original_duration {duration}")
            fname = original.get("fname")
            if not isinstance(fname, str) or not fname:
                raise DataError(f"{where} has fname {json.dumps(fname)[:60]}, not a path")
            audio = data_dir / fname
            if not audio.is_file():
                raise DataError(f"{audio} is missing ({manifest.name} entry {number} lists {fname}; the paths are "
                                f"relative to {data_dir})")
            utterances.append(Utterance(str(audio), normalize(transcript), duration))
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
