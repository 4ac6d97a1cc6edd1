"""Made-up LibriSpeech in the published layout (<split>/<speaker>/<chapter>/<speaker>-<chapter>-
<utt>.flac with a <speaker>-<chapter>.trans.txt per chapter) and the reference's sentencepiece
model, for measuring the host pipeline at full size without the real set (write_sample_data) and
for tests. The files are what the real loader reads, at the real set's scale per utterance:

  durations   a left-skewed distribution with the member's mean (12.3 s at full size, as
              LibriSpeech 960 h: 3.46M s over 281,241 utterances), capped at its max_duration
              (16.7 s: longer ones the job drops, so writing them would only cost time)
  audio       16 kHz mono, 16-bit FLAC: a pulse train through two formant resonators, under a
              syllable-rate envelope with pauses, over a faint noise floor; about 17 KB a second
              once compressed, as LibriSpeech's FLAC (pure white noise would not compress)
  transcripts upper case, 2.73 words a second (LibriSpeech's rate) of a made-up language: 10,000
              pseudo-words with Zipf frequencies, so the 1023-piece unigram model cuts a 12.3 s
              transcript into about 50 pieces (LibriSpeech: 45)

Everything is a function of the seed; the contents are noise, so no WER target is reachable."""

from __future__ import annotations

import io
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np

from trainclock.workloads.rnnt.data import tokenizer
from trainclock.workloads.rnnt.data.prepare import EVAL_SPLIT, SPM_NAME, TRAIN_SPLITS
from trainclock.workloads.rnnt.features import SAMPLE_RATE

WORDS_PER_SECOND = 2.73  # LibriSpeech 960 h: 9.4M words in 3.46M seconds
LEXICON = 10_000
SPM_SENTENCES = 2_000  # the sentencepiece model's training text: ~1 s to train, enough for 1023 pieces
PER_CHAPTER = 50  # LibriSpeech train-clean-100: 28,539 utterances in 585 chapters
CHAPTERS_PER_SPEAKER = 2
EVAL_UTTERANCES = 1  # the smallest evaluation set the job accepts
SKEW = 4.0  # the duration Beta's first shape: most utterances near the cap, a tail of short ones

ONSETS = "b c d f g h k l m n p r s t w y bl br ch cr dr fr gr pl pr sh sp st th tr wh".split()
VOWELS = "a e i o u a e i o ea ee ou".split()
CODAS = ["", "", "", "", "n", "r", "s", "t", "d", "l", "ng", "st", "nd"]
SUFFIXES = ["", "", "", "", "s", "ed", "ing", "ly", "er"]  # shared endings, as English has: pieces of their own


@cache
def lexicon() -> tuple[np.ndarray, np.ndarray]:
    """(words, probabilities): the made-up language, the same for every seed (as a language is)."""
    rng = np.random.default_rng(1023)
    words: dict[str, None] = {}
    while len(words) < LEXICON:
        syllables = 1 + int(rng.binomial(2, 0.4))
        word = "".join(ONSETS[rng.integers(len(ONSETS))] + VOWELS[rng.integers(len(VOWELS))]
                       + CODAS[rng.integers(len(CODAS))] for _ in range(syllables))
        words.setdefault(word + SUFFIXES[rng.integers(len(SUFFIXES))])
    ranked = np.array(sorted(words, key=len))  # the frequent words are the short ones, as in English
    zipf = 1.0 / np.arange(1, LEXICON + 1)
    return ranked, zipf / zipf.sum()


def transcript(rng: np.random.Generator, seconds: float) -> str:
    words, p = lexicon()
    count = max(1, int(rng.poisson(WORDS_PER_SECOND * seconds)))
    return " ".join(words[rng.choice(LEXICON, count, p=p)]).upper()


def durations(rng: np.random.Generator, count: int, mean: float, cap: float) -> np.ndarray:
    """Seconds of `count` utterances: floor + (cap - floor) x Beta(SKEW, b), b set so the mean is `mean`."""
    floor = 0.08 * mean  # 1 s at full size: LibriSpeech's shortest are about that
    share = min(0.95, (mean - floor) / (cap - floor))
    return floor + (cap - floor) * rng.beta(SKEW, SKEW * (1 - share) / share, count)


def speech(rng: np.random.Generator, seconds: float) -> np.ndarray:
    """float32 audio in [-1, 1] with speech's compressibility: voiced formants under syllables."""
    from scipy.signal import lfilter

    n = max(1, int(seconds * SAMPLE_RATE))
    hop = SAMPLE_RATE // 50  # 20 ms envelope steps: syllables of 100-300 ms, word gaps
    points = n // hop + 1
    envelope = np.exp(rng.normal(0, 0.8, points)) * (rng.random(points) > 0.15)
    envelope = np.repeat(np.convolve(envelope, np.hanning(7) / 3, "same").astype(np.float32), hop)[:n]
    white = rng.standard_normal(n, dtype=np.float32)
    excitation = white * np.float32(0.3)
    excitation[::int(SAMPLE_RATE / rng.uniform(90, 220))] += 3.0  # glottal pulses at the speaker's pitch
    a = np.array([1.0])
    for centre, bandwidth in ((rng.uniform(400, 800), 100), (rng.uniform(1200, 2200), 150)):
        r, theta = np.exp(-np.pi * bandwidth / SAMPLE_RATE), 2 * np.pi * centre / SAMPLE_RATE
        a = np.convolve(a, [1, -2 * r * np.cos(theta), r * r])  # both formants in one filter pass
    voiced = lfilter(np.ones(1, np.float32), a.astype(np.float32), excitation) * envelope
    voiced *= np.float32(0.1 / (float(np.sqrt(np.mean(voiced ** 2))) + 1e-9))
    voiced += white * np.float32(3e-4)  # the room (the excitation's noise: one draw serves both)
    return np.clip(voiced, -1, 1)


def flac_bytes(audio: np.ndarray) -> bytes:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, audio, SAMPLE_RATE, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def write_tree(root: Path, split: str, utterances: Mapping[str, tuple[np.ndarray | bytes, str]]) -> None:
    """root/<split>/<speaker>/<chapter>/<key>.flac (audio, or FLAC bytes already encoded) and each
    chapter's <speaker>-<chapter>.trans.txt of "KEY TRANSCRIPT" lines; keys are 'speaker-chapter-utt'."""
    listings: dict[Path, list[str]] = {}
    for key, (audio, text) in utterances.items():
        speaker, chapter, _ = key.split("-")
        folder = root / split / speaker / chapter
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}.flac").write_bytes(audio if isinstance(audio, bytes) else flac_bytes(audio))
        listings.setdefault(folder / f"{speaker}-{chapter}.trans.txt", []).append(f"{key} {text}")
    for path, lines in listings.items():
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def utterance(seed: int, split: int, i: int, mean: float, cap: float) -> tuple[str, bytes, str]:
    """(key, FLAC bytes, transcript) of utterance i of a split, from (seed, split, i) alone."""
    rng = np.random.default_rng([seed, split, i])
    seconds = float(durations(rng, 1, mean, cap)[0])
    chapter = i // PER_CHAPTER
    key = f"{100 + chapter // CHAPTERS_PER_SPEAKER}-{1000 + chapter}-{i % PER_CHAPTER:04d}"
    return key, flac_bytes(speech(rng, seconds)), transcript(rng, seconds)


def write_split(root: Path, split: str, number: int, count: int, seed: int, mean: float, cap: float) -> None:
    # numpy, scipy's filter and libFLAC release the GIL for most of an utterance: two threads near double
    with ThreadPoolExecutor(2) as pool:
        made = list(pool.map(lambda i: utterance(seed, number, i, mean, cap), range(count)))
    write_tree(root, split, {key: (audio, text) for key, audio, text in made})


def write_librispeech(folder: Path, train: int, seed: int, vocab: int, mean: float, cap: float,
                      sentencepiece: bool) -> Path:
    """`train` utterances as train-clean-100 and EVAL_UTTERANCES as dev-clean under folder/LibriSpeech,
    and, where `sentencepiece`, the reference's model file (sentencepieces/librispeech1023.model) of
    `vocab` pieces trained on the language's text; returns the folder --data names."""
    root = folder / "LibriSpeech"
    write_split(root, TRAIN_SPLITS[0], 0, train, seed, mean, cap)
    write_split(root, EVAL_SPLIT, 1, EVAL_UTTERANCES, seed, mean, cap)
    if sentencepiece:
        rng = np.random.default_rng([seed, 2])
        text = [transcript(rng, mean).lower() for _ in range(SPM_SENTENCES)]
        tokenizer.train(text, vocab, folder / "sentencepieces" / SPM_NAME)
    return folder
