"""The CPU tiers' data: Debian's Fashion-MNIST (idx .gz files) exported ONCE into the ImageNet
folder layout (train/<class>/*.JPEG, val/<class>/*.JPEG), so the tiers read their images through
the very loader, decoder and transforms the full size uses. The export is deterministic (fixed
image order, fixed JPEG quality) and cached in the data home; meta.json is written last inside a
staging folder that is renamed whole, so its presence means complete."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from trainclock.errors import DataError
from trainclock.storage import build_once, prepared_path
from trainclock.datasets.fashion_mnist import CLASSES, load_split, source_folder

FORMAT_VERSION = 1
JPEG_QUALITY = 90


def prepared_folder(train_images: int, val_images: int, side: int) -> Path:
    return prepared_path(f"resnet-fashion-mnist-{train_images}-{val_images}-{side}px", FORMAT_VERSION, source_folder(),
                         train_images, val_images, side, digits=10)


def prepare(train_images: int, val_images: int, side: int, force: bool = False) -> Path:
    """The tier's folder tree (made now if missing): the first `train_images` / `val_images`
    images of each split, resized to side x side, as JPEGs."""
    counts = {"train": train_images, "val": val_images}
    return build_once(prepared_folder(train_images, val_images, side), "meta.json",
                      lambda staging: _build(staging, counts, side), force)


def _build(staging: Path, counts: dict[str, int], side: int) -> None:
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
