"""The CPU tiers' data: Debian's Fashion-MNIST (idx .gz files) exported ONCE into the ImageNet
folder layout (train/<class>/*.JPEG, val/<class>/*.JPEG), so the tiers read their images through
the very loader, decoder and transforms the full size uses. The export is deterministic (fixed
image order, fixed JPEG quality) and cached in the data home; meta.json is written last inside a
staging folder that is renamed whole, so its presence means complete."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from trainclock.errors import DataError
from trainclock.storage import data_home

FORMAT_VERSION = 1
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
CLASSES = ("t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle-boot")
JPEG_QUALITY = 90
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "val": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


def source_folder() -> Path:
    return Path(os.environ.get("TRAINCLOCK_FASHION_MNIST", FASHION_MNIST))


def _idx(path: Path, magic: int) -> np.ndarray:
    """An idx file's array (images: n x 28 x 28 uint8, labels: n uint8)."""
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DataError(f"cannot read {path} ({type(e).__name__}); install Debian's dataset-fashion-mnist "
                        "(apt-get install dataset-fashion-mnist) or set $TRAINCLOCK_FASHION_MNIST") from None
    dims = raw[3]
    if int.from_bytes(raw[:4], "big") != magic:
        raise DataError(f"{path} is not an idx file of the expected kind; reinstall dataset-fashion-mnist")
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    images, labels = FILES[split]
    folder = source_folder()
    return _idx(folder / images, 0x803), _idx(folder / labels, 0x801)


def prepared_folder(train_images: int, val_images: int, side: int) -> Path:
    key = hashlib.sha256(f"{FORMAT_VERSION}\0{source_folder()}\0{train_images}\0{val_images}\0{side}".encode())
    return data_home() / "prepared" / f"resnet-fashion-mnist-{train_images}-{val_images}-{side}px-{key.hexdigest()[:10]}"


def prepare(train_images: int, val_images: int, side: int, force: bool = False) -> Path:
    """The tier's folder tree (made now if missing): the first `train_images` / `val_images`
    images of each split, resized to side x side, as JPEGs."""
    folder = prepared_folder(train_images, val_images, side)
    if force and folder.exists():
        shutil.rmtree(folder)
    if not (folder / "meta.json").exists():
        _build(folder, {"train": train_images, "val": val_images}, side)
    return folder


def _build(folder: Path, counts: dict[str, int], side: int) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        for split, count in counts.items():
            images, labels = load_split(split)
            if count > len(images):
                raise DataError(f"Fashion-MNIST's {split} split has {len(images)} images, fewer than the {count} asked")
            for name in CLASSES:
                (staging / split / name).mkdir(parents=True)
            for i in range(count):
                image = Image.fromarray(images[i], mode="L")
                if side != image.width:
                    image = image.resize((side, side), Image.BILINEAR)
                # grayscale JPEGs: the loader converts every image to RGB, as ImageNet's CMYK/L files
                image.save(staging / split / CLASSES[labels[i]] / f"{split}_{i:06d}.JPEG", quality=JPEG_QUALITY)
        meta = {"format": FORMAT_VERSION, "source": str(source_folder()), "images": counts, "side": side,
                "classes": list(CLASSES)}
        (staging / "meta.json").write_text(json.dumps(meta, indent=1))
        if folder.exists():  # a stale incomplete folder, or another process finished first
            shutil.rmtree(folder)
        os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
