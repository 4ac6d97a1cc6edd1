"""The tiers' mosaics written into an official layout (untimed `trainclock data prepare`, cached in
the data home): training mosaics from Fashion-MNIST's train items, validation ones from its test
items. The folder is built under a staging name and renamed whole, so its presence means complete."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

from trainclock.storage import build_once, prepared_path
from trainclock.workloads.detection.data.layout import COCO_NAMES, OPENIMAGES_LABELS, OPENIMAGES_NAMES
from trainclock.workloads.detection.data.mosaic import mosaic
from trainclock.datasets.fashion_mnist import CLASSES, load_split, source_folder

FORMAT_VERSION = 2  # 2: items of a quarter to a half of the side


def labels_json(mosaics: list, names: list[str], first_id: int) -> dict:
    images, annotations = [], []
    for i, (m, name) in enumerate(zip(mosaics, names)):
        side = m.image.shape[0]
        images.append({"id": first_id + i, "file_name": name, "height": side, "width": side})
        for box, label, mask in zip(m.boxes, m.labels, m.masks):
            rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
            rle["counts"] = rle["counts"].decode()
            annotations.append({"id": len(annotations) + 1, "image_id": first_id + i, "category_id": label + 1,
                                "bbox": box, "area": int(mask.sum()), "iscrowd": 0, "segmentation": rle})
    return {"images": images, "annotations": annotations,
            "categories": [{"id": k + 1, "name": name} for k, name in enumerate(CLASSES)]}


def write_split(root: Path, layout: str, split: str, mosaics: list, first_id: int) -> None:
    if layout == "coco":
        images, labels = root / COCO_NAMES[split], root / "annotations" / f"instances_{COCO_NAMES[split]}.json"
    else:
        images, labels = root / OPENIMAGES_NAMES[split] / "data", root / OPENIMAGES_NAMES[split] / "labels" / OPENIMAGES_LABELS
    images.mkdir(parents=True)
    labels.parent.mkdir(parents=True, exist_ok=True)
    names = [f"{first_id + i:08d}.png" for i in range(len(mosaics))]
    for m, name in zip(mosaics, names):
        Image.fromarray(m.image).save(images / name, compress_level=1)
    labels.write_text(json.dumps(labels_json(mosaics, names, first_id)))


def generate(count: int, side: int, seed: int, split: str) -> list:
    items, classes = load_split(split)
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    return [mosaic(rng, items, classes, side) for _ in range(count)]


def prepared_folder(layout: str, train: int, val: int, side: int, seed: int) -> Path:
    return prepared_path(f"detection-mosaic-{layout}-{train}-{val}-{side}px", FORMAT_VERSION, source_folder(), layout,
                         train, val, side, seed, digits=10)


def prepare(layout: str, train: int, val: int, side: int, seed: int = 0, force: bool = False) -> Path:
    """The tier's folder (made now if missing) in `layout`: "coco" or "openimages"."""

    def build(staging: Path) -> None:
        write_split(staging, layout, "train", generate(train, side, seed, "train"), 1)
        write_split(staging, layout, "val", generate(val, side, seed, "val"), 1_000_000)
        meta = {"format": FORMAT_VERSION, "layout": layout, "train": train, "val": val, "side": side, "seed": seed}
        (staging / "meta.json").write_text(json.dumps(meta))

    return build_once(prepared_folder(layout, train, val, side, seed), "meta.json", build, force)
