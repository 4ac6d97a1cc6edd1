"""Debian's Fashion-MNIST (package dataset-fashion-mnist, gzipped idx files): the offline image
source every CPU tier that needs natural-looking items builds its data from. Generic, so no
benchmark's folder reads another's."""

from __future__ import annotations

import gzip
import os
from functools import cache
from pathlib import Path

import numpy as np

from trainclock.errors import DataError

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
CLASSES = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot")
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "val": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
IMAGES_MAGIC, LABELS_MAGIC = 0x803, 0x801  # idx: uint8 data, 3 dimensions / 1 dimension


def source_folder() -> Path:
    return Path(os.environ.get("TRAINCLOCK_FASHION_MNIST", FASHION_MNIST))


def read_idx(path: Path, magic: int) -> np.ndarray:
    """An idx file's array (images: n x 28 x 28 uint8, labels: n uint8)."""
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"cannot read {path} ({type(e).__name__}); install Debian's dataset-fashion-mnist "
                        "(apt-get install dataset-fashion-mnist) or set $TRAINCLOCK_FASHION_MNIST") from None
    if len(raw) < 4 or int.from_bytes(raw[:4], "big") != magic:
        raise DataError(f"{path} is not an idx file of the expected kind; reinstall dataset-fashion-mnist")
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    if len(raw) != 4 + 4 * dims + int(np.prod(shape)):
        raise DataError(f"{path} is truncated or padded (shape {shape}); reinstall dataset-fashion-mnist")
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


@cache
def load_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images n x 28 x 28 uint8, labels n uint8) of 'train' (60,000) or 'val' (the 10,000 test items)."""
    images, labels = FILES[split]
    folder = source_folder()
    return read_idx(folder / images, IMAGES_MAGIC), read_idx(folder / labels, LABELS_MAGIC)
