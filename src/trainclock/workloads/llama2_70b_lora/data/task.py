"""The CPU tiers' offline stand-in for SCROLLS GovReport: summarise a scene by who speaks in it.

The text is the Shakespeare corpus the project installs (datasets/shakespeare.py: the Gutenberg
plays, one file each). A document is a run of consecutive speeches, each cut to its speaker line
and first line of verse; its summary lists the speakers in order of first appearance ("Speakers:
HELENA, PAROLLES."). Prompt and answer take the reference's template (scripts/utils.py:
"### Summarize the following text:\\n {doc}\\n ### Summary:\\n {summary}<eos>") and, as its
evaluation does, only the summary is scored.

Tokens are bytes (0-255) plus an end-of-text id, so no tokenizer is trained or shipped. Plays are
split, not documents: every SPLIT_EVERY-th play (sorted by file name) is held out for validation
and for nothing else, pretraining included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainclock.datasets import shakespeare
from trainclock.errors import DataError
from trainclock.workloads.llama2_70b_lora.model import IGNORE

EOS = 256  # the end-of-text id after the 256 byte values; also the padding input (its labels are IGNORE)
SPLIT_EVERY = 7  # plays 6, 13, 20, ... of the sorted 42 are the validation split
SPEECHES_PER_DOCUMENT = (2, 5)  # inclusive range, drawn per document from a fixed seed
LINE_CHARS = 48  # each speech's first line, cut to this many characters
PROMPT = "### Summarize the following text:\n {document}\n ### Summary:\n "
SPEAKER_LINE = re.compile(r"^([A-Z][A-Z' \-]{1,30})\.$")


def play_files(folder: Path | None = None) -> list[Path]:
    """The plays of `folder`, else of the installed corpus (fetched on first use), in file-name order."""
    files = sorted(folder.glob("*.txt")) if folder is not None else shakespeare.play_files()
    if len(files) < SPLIT_EVERY:
        raise DataError(f"the Shakespeare corpus in {folder or shakespeare.corpus_dir()} has {len(files)} plays, "
                        f"fewer than the {SPLIT_EVERY} the split needs; reinstall it with `trainclock data fetch`")
    return files


def split_plays(files: list[Path]) -> dict[str, list[Path]]:
    return {"train": [f for i, f in enumerate(files) if i % SPLIT_EVERY != SPLIT_EVERY - 1],
            "val": [f for i, f in enumerate(files) if i % SPLIT_EVERY == SPLIT_EVERY - 1]}


def speeches(text: str) -> list[tuple[str, str]]:
    """(speaker, first line) of each speech: a paragraph whose first line is an upper-case name and a full stop."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [line.strip() for line in paragraph.strip().split("\n")]
        if len(lines) >= 2 and (m := SPEAKER_LINE.match(lines[0])) and lines[1]:
            found.append((m.group(1), lines[1][:LINE_CHARS]))
    return found


@dataclass(frozen=True)
class Example:
    document: str
    summary: str


def examples(files: list[Path], seed: int = 0) -> list[Example]:
    """Consecutive, non-overlapping runs of speeches cut from each play in order."""
    rng = np.random.default_rng(seed)
    out = []
    for path in files:
        found = speeches(path.read_text(encoding="utf-8", errors="replace"))
        at = 0
        while True:
            n = int(rng.integers(SPEECHES_PER_DOCUMENT[0], SPEECHES_PER_DOCUMENT[1] + 1))
            if at + n > len(found):
                break
            run = found[at:at + n]
            at += n
            document = "\n".join(f"{name}.\n{line}" for name, line in run)
            speakers = list(dict.fromkeys(name for name, _ in run))
            out.append(Example(document, f"Speakers: {', '.join(speakers)}."))
    return out


def encode(example: Example, seq_len: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(inputs, labels) of one sample, each seq_len long: labels are the next bytes on the summary
    and its end of text, IGNORE on the prompt and the padding; None if the sample does not fit
    (the reference drops samples longer than its 8192 tokens)."""
    prompt = PROMPT.format(document=example.document).encode()
    answer = example.summary.encode()
    tokens = np.frombuffer(prompt + answer, dtype=np.uint8).astype(np.int64).tolist() + [EOS]
    if len(tokens) > seq_len + 1:
        return None
    labels = [IGNORE] * (len(prompt) - 1) + tokens[len(prompt):]
    inputs = tokens[:-1]
    pad = seq_len - len(inputs)
    return np.array(inputs + [EOS] * pad), np.array(labels + [IGNORE] * pad)


@dataclass(frozen=True)
class TaskSplit:
    inputs: torch.Tensor  # (N, T) int64
    labels: torch.Tensor  # (N, T) int64, IGNORE where not scored


def task_split(split: str, seq_len: int, folder: Path | None = None) -> TaskSplit:
    """Every sample of a split that fits seq_len, in a fixed order."""
    encoded = [e for ex in examples(split_plays(play_files(folder))[split]) if (e := encode(ex, seq_len))]
    if not encoded:
        raise DataError(f"no {split} sample fits {seq_len} bytes; "
                        f"check the corpus in {folder or shakespeare.corpus_dir()}")
    return TaskSplit(torch.from_numpy(np.stack([i for i, _ in encoded])), torch.from_numpy(np.stack([l for _, l in encoded])))


def pretraining_bytes(folder: Path | None = None) -> np.ndarray:
    """The train plays' full text as bytes, one play after another with an end of text between."""
    parts = []
    for path in split_plays(play_files(folder))["train"]:
        parts.append(np.frombuffer(path.read_bytes(), dtype=np.uint8).astype(np.int16))
        parts.append(np.array([EOS], dtype=np.int16))
    return np.concatenate(parts)
