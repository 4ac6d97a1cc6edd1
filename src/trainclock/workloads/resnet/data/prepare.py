"""The CPU tiers' data: Debian's Fashion-MNIST (idx .gz files) exported ONCE into the ImageNet
folder layout (train/<class>/*.JPEG, val/<class>/*.JPEG), so the tiers read their images through
the very loader, decoder and transforms the full size uses. The export is deterministic (fixed
image order, fixed JPEG quality) and cached in the data home; meta.json is written last inside a
staging folder that is renamed whole, so its presence means complete."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from PIL import Image

from trainclock.errors import DataError
from trainclock.storage import data_home, discard_folder, staged_folder
from trainclock.datasets.fashion_mnist import CLASSES, load_split, source_folder

FORMAT_VERSION = 1
JPEG_QUALITY = 90


def prepared_folder(train_images: int, val_images: int, side: int) -> Path:
    key = hashlib.sha256(f"{FORMAT_VERSION}\0{source_folder()}\0{train_images}\0{val_images}\0{side}".encode())
    return data_home() / "prepared" / f"resnet-fashion-mnist-{train_images}-{val_images}-{side}px-{key.hexdigest()[:10]}"


def prepare(train_images: int, val_images: int, side: int, force: bool = False) -> Path:
    """The tier's folder tree (made now if missing): the first `train_images` / `val_images`
    images of each split, resized to side x side, as JPEGs."""
    folder = prepared_folder(train_images, val_images, side)
    if force:
        discard_folder(folder)  # in one step: no half cache left looking complete
    if not (folder / "meta.json").exists():
        _build(folder, {"train": train_images, "val": val_images}, side)
    return folder


def _build(folder: Path, counts: dict[str, int], side: int) -> None:
    with staged_folder(folder, "meta.json") as staging:
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
