"""The CPU tiers' LibriSpeech stand-in: short utterances spoken by Debian's espeak-ng, written in
the LibriSpeech layout as FLAC so the real loader reads them.

A vocabulary of 40 words; each utterance is 1-5 of them drawn at random, spoken by one of eight
English accents with one of 14 voice variants (male, female, whisper-free), at 130-210 words a
minute, pitch 25-75, with white noise at 20-35 dB SNR and a random gain. Speakers are the
accent x variant pairs; chapters are per utterance batch. Everything is a function of the seed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.workloads.rnnt.features import SAMPLE_RATE

WORDS = ("zero one two three four five six seven eight nine ten red green blue yellow black white "
         "orange purple brown cat dog bird fish horse apple bread water house car left right up down "
         "stop go yes no open close").split()
ACCENTS = ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp", "en-gb-x-gbcwmd", "en-029",
           "en-us-nyc")
VARIANTS = ("", "+m1", "+m2", "+m3", "+m4", "+m5", "+m6", "+m7", "+f1", "+f2", "+f3", "+f4", "+f5", "+klatt")


def espeak() -> str:
    found = shutil.which("espeak-ng")
    if found is None:
        raise DataError("the rnnt CPU tiers synthesise their speech with espeak-ng, which is not installed; "
                        "install it (apt-get install espeak-ng) and prepare the data again")
    return found


def speak(program: str, voice: str, speed: int, pitch: int, text: str) -> np.ndarray:
    """espeak-ng's 22,050 Hz output resampled to 16 kHz, as float32."""
    import soundfile
    from scipy.signal import resample_poly

    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "out.wav"
        done = subprocess.run([program, "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(wav), text],
                              capture_output=True, text=True)
        if done.returncode != 0 or not wav.exists():
            raise DataError(f"espeak-ng failed on voice {voice}: {done.stderr.strip()[:200]}")
        audio, rate = soundfile.read(str(wav), dtype="float32")
    return resample_poly(audio, SAMPLE_RATE // 50, rate // 50).astype(np.float32) if rate != SAMPLE_RATE else audio


def utterance_plan(rng: np.random.Generator) -> tuple[str, int, str, int, int, float, float]:
    """(text, speaker, voice, speed, pitch, SNR dB, gain) of one utterance."""
    words = rng.choice(WORDS, size=int(rng.integers(1, 6)))
    accent, variant = int(rng.integers(len(ACCENTS))), int(rng.integers(len(VARIANTS)))
    return (" ".join(words), accent * len(VARIANTS) + variant, ACCENTS[accent] + VARIANTS[variant],
            int(rng.integers(130, 211)), int(rng.integers(25, 76)), float(rng.uniform(20, 35)), float(rng.uniform(0.3, 1.0)))


def generate(folder: Path, split: str, count: int, seed: int, workers: int = 4) -> None:
    """`count` utterances into folder/<split>/<speaker>/<chapter>/ as FLAC + .trans.txt."""
    import soundfile

    program = espeak()
    plans = [utterance_plan(np.random.default_rng([seed, i])) for i in range(count)]
    with ThreadPoolExecutor(workers) as pool:  # espeak-ng runs as separate processes
        audios = list(pool.map(lambda p: speak(program, p[2], p[3], p[4], p[0]), plans))
    listings: dict[Path, list[str]] = {}
    for i, ((text, speaker, _, _, _, snr, gain), audio) in enumerate(zip(plans, audios)):
        rng = np.random.default_rng([seed, i, 1])
        audio = audio / max(1e-6, float(np.abs(audio).max())) * gain
        noise = rng.standard_normal(len(audio)).astype(np.float32) * float(np.sqrt(np.mean(audio ** 2))) * 10 ** (-snr / 20)
        audio = np.clip(audio + noise, -1, 1)
        chapter = i // 50
        key = f"{speaker}-{chapter}-{i:04d}"
        where = folder / split / str(speaker) / str(chapter)
        where.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(where / f"{key}.flac"), audio, SAMPLE_RATE, format="FLAC", subtype="PCM_16")
        listings.setdefault(where / f"{speaker}-{chapter}.trans.txt", []).append(f"{key} {text.upper()}")
    for listing, lines in listings.items():
        listing.write_text("\n".join(lines) + "\n", encoding="utf-8")
