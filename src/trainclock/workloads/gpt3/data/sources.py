"""Where the text comes from: the default corpus, local text files, or C4 json.gz shards.

A source yields *pieces* of text, each already assigned to the train or validation split,
in a fixed order, so the split never depends on the machine, the seed or the run.
"""

from __future__ import annotations

import glob
import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trainclock.datasets import shakespeare
from trainclock.errors import DataError, UsageError
from trainclock.storage import InputFiles, atomic_writer, cache_key

VAL_EVERY = 20  # one piece in 20 goes to validation (5%)
PIECE_CHARS = 4096  # text files are cut into pieces of about this size, at line breaks


@dataclass(frozen=True)
class Piece:
    text: str
    split: str  # "train" or "val"
    ends_document: bool


class TextFiles(InputFiles):
    """Plain UTF-8 text files; each file is one document."""

    def pieces(self) -> Iterator[Piece]:
        index = 0
        for path in self.paths:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as e:
                raise DataError(f"cannot read text file {path}: {e.strerror}; check the path") from None
            chunks = list(_split_text(text))
            for i, chunk in enumerate(chunks):
                yield Piece(chunk, "val" if index % VAL_EVERY == VAL_EVERY - 1 else "train", i == len(chunks) - 1)
                index += 1


class C4Shards(InputFiles):
    """C4 in its published format: gzipped JSON lines with a "text" field per document.
    Files named *validation* form the validation split (as in MLPerf's c4/en layout);
    without such files, every 20th document is held out."""

    def pieces(self) -> Iterator[Piece]:
        has_validation_files = any("validation" in p.name for p in self.paths)
        index = 0
        for path in self.paths:
            for lineno, line in _read_json_gz_lines(path):
                try:
                    text = json.loads(line)["text"]
                    if not isinstance(text, str):  # a number or null would reach the tokenizer
                        raise TypeError
                except (ValueError, KeyError, TypeError, RecursionError):
                    raise DataError(
                        f"{path}:{lineno}: not a C4 record (a JSON object with a 'text' field); "
                        "check that the file is a C4 json.gz shard"
                    ) from None
                if has_validation_files:
                    split = "val" if "validation" in path.name else "train"
                else:
                    split = "val" if index % VAL_EVERY == VAL_EVERY - 1 else "train"
                index += 1
                yield Piece(text, split, True)


Source = TextFiles | C4Shards


def parse_source(text: str) -> Source:
    """`shakespeare` (the default corpus), `c4:PATH` (a shard, a glob or a folder of json.gz
    shards), or a path to a text file or a folder of .txt files."""
    if text == "shakespeare":
        return TextFiles("shakespeare", tuple(shakespeare.play_files()))
    if text.startswith("c4:"):
        paths = _expand(text[3:], "*.json.gz")
        return C4Shards("c4", paths)
    paths = _expand(text, "*.txt")
    return TextFiles("text-" + cache_key(paths, digits=8), paths)


def _split_text(text: str) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = text.find("\n", start + PIECE_CHARS)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def write_c4_shard(path: Path, texts: Iterable[str], compresslevel: int = 6) -> None:
    """Documents as one C4 json.gz shard (a JSON object with text, timestamp and url a line), written atomically."""
    with atomic_writer(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel) as f:
        for i, text in enumerate(texts):
            record = {"text": text, "timestamp": "2019-04-25T12:00:00Z", "url": f"https://example.com/{i}"}
            f.write((json.dumps(record) + "\n").encode())


def _read_json_gz_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if line.strip():
                    yield lineno, line
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read C4 shard {path}: {e}; re-download the shard") from None


def _expand(spec: str, pattern: str) -> tuple[Path, ...]:
    path = Path(spec).expanduser()
    if path.is_dir():
        paths = sorted(path.glob(pattern))
    else:
        paths = sorted(Path(p) for p in glob.glob(str(path)) if Path(p).is_file())
    if not paths:
        raise UsageError(f"no data files found at {spec!r} (looked for {pattern}); name a file, a folder or a glob")
    return tuple(paths)
