"""Where the CPU tiers' text comes from, as documents of sentences. The default is the English
corpus the GPT-3 tier installs (`trainclock data fetch`) in the shared data home; any folder of
.txt files does too. Documents are blocks of lines; every 20th goes to the eval split, so the split
never depends on the machine, the seed or the run."""

from __future__ import annotations

from pathlib import Path

from trainclock.datasets import shakespeare
from trainclock.errors import DataError, UsageError
from trainclock.storage import InputFiles, cache_key

LINES_PER_DOCUMENT = 200
EVAL_EVERY = 20


class TextSource(InputFiles):
    """Text files, read as documents of sentences."""

    def documents(self) -> tuple[list[list[str]], list[list[str]]]:
        """(train, eval) documents, each a list of non-empty lines (the sentences)."""
        train, evaluation, index = [], [], 0
        for path in self.paths:
            try:
                lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
            except OSError as e:
                raise DataError(f"cannot read text file {path}: {e.strerror}; check the path") from None
            lines = [ln for ln in lines if ln]
            for start in range(0, len(lines), LINES_PER_DOCUMENT):
                (evaluation if index % EVAL_EVERY == EVAL_EVERY - 1 else train).append(
                    lines[start:start + LINES_PER_DOCUMENT])
                index += 1
        return train, evaluation


def parse_source(text: str) -> TextSource:
    """`shakespeare` (the default corpus, installed by `trainclock data fetch`), or a text file or
    folder of .txt files."""
    if text == "shakespeare":
        return TextSource("shakespeare", tuple(shakespeare.play_files()))
    path = Path(text).expanduser()
    paths = tuple(sorted(path.glob("*.txt"))) if path.is_dir() else ((path,) if path.is_file() else ())
    if not paths:
        raise UsageError(f"no text files found at {text!r} (looked for *.txt); name a file or a folder")
    return TextSource("text-" + cache_key(paths, digits=8), paths)
