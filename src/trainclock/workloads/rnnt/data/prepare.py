"""Where a run's utterances and sentencepiece model come from:

  CPU tier, no --data:  espeak-ng speech generated once (synthetic.py) into
                        <data home>/prepared/rnnt-<tier>-<key>/LibriSpeech/{train,dev}/ as FLAC,
                        with a sentencepiece model trained on its training transcripts
  --data FOLDER:        LibriSpeech as published (train-clean-100, train-clean-360,
                        train-other-500, dev-clean folders) or the reference's wav manifests
                        (librispeech-<split>-wav.json); the sentencepiece model
                        librispeech1023.model is read from the folder (or its sentencepieces/),
                        or trained once into the cache from the training transcripts

meta.json is written last: its presence means the tier's cache is complete."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import DataError, require_folder
from trainclock.storage import atomic_write_text, build_once, prepared_path
from trainclock.workloads.rnnt.data import synthetic, tokenizer
from trainclock.workloads.rnnt.data.librispeech import Utterance, read_split

FORMAT_VERSION = 1
DATA_SEED = 1023  # the tiers' speech depends on this alone, never on the run's seed
TRAIN_SPLITS = ("train-clean-100", "train-clean-360", "train-other-500")
EVAL_SPLIT = "dev-clean"
SPM_NAME = "librispeech1023.model"


@dataclass(frozen=True)
class Corpus:
    train: list[Utterance]
    eval: list[Utterance]
    sentencepiece: Path


def tier_folder(name: str, train: int, evals: int, vocab: int) -> Path:
    return prepared_path(name, FORMAT_VERSION, train, evals, vocab, DATA_SEED)


def prepare_tier(name: str, train: int, evals: int, vocab: int, force: bool = False) -> Corpus:
    def build(staging: Path) -> None:
        synthetic.generate(staging / "LibriSpeech", "train", train, DATA_SEED)
        synthetic.generate(staging / "LibriSpeech", "dev", evals, DATA_SEED + 1)
        transcripts = (u.transcript for u in read_split(staging / "LibriSpeech" / "train"))
        tokenizer.train(transcripts, vocab, staging / "spm.model")
        atomic_write_text(staging / "meta.json", json.dumps({"train": train, "eval": evals, "vocab": vocab,
                                                              "seed": DATA_SEED, "version": FORMAT_VERSION}) + "\n")

    folder = build_once(tier_folder(name, train, evals, vocab), "meta.json", build, force)
    root = folder / "LibriSpeech"
    return Corpus(read_split(root / "train"), read_split(root / "dev"), folder / "spm.model")


def _split(folder: Path, name: str) -> Path | None:
    for candidate in (folder / name, folder / "LibriSpeech" / name, folder / f"librispeech-{name}-wav.json"):
        if candidate.exists():
            return candidate
    return None


def prepare_official(folder: Path, vocab: int, force: bool = False) -> Corpus:
    """LibriSpeech from a local copy: every training split found (at least one) and dev-clean."""
    require_folder(folder, "pass --data with LibriSpeech (train-*/dev-clean folders of FLAC) or the "
                           "reference's librispeech-*-wav.json manifests")
    train_paths = [p for p in (_split(folder, s) for s in TRAIN_SPLITS) if p is not None]
    eval_path = _split(folder, EVAL_SPLIT)
    if not train_paths or eval_path is None:
        raise DataError(f"{folder} needs dev-clean and at least one of {', '.join(TRAIN_SPLITS)} (folders, or "
                        "librispeech-<split>-wav.json manifests)")
    train = [u for p in train_paths for u in read_split(p, folder)]
    evals = read_split(eval_path, folder)
    for spm in (folder / SPM_NAME, folder / "sentencepieces" / SPM_NAME):
        if spm.is_file():
            tokenizer.load(spm, vocab)  # checked now: a garbage model fails `data prepare`, not the run
            return Corpus(train, evals, spm)
    spm = prepared_path("rnnt-librispeech", FORMAT_VERSION, folder.resolve(), vocab) / SPM_NAME
    if not force and spm.is_file():
        try:
            tokenizer.load(spm, vocab)
            return Corpus(train, evals, spm)
        except DataError:
            spm.unlink(missing_ok=True)  # a damaged cached model is never kept: trained again below
    tokenizer.train((u.transcript for u in train), vocab, spm)
    try:
        tokenizer.load(spm, vocab)
    except DataError:
        spm.unlink(missing_ok=True)
        raise
    return Corpus(train, evals, spm)
