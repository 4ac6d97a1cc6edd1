"""Made-up data in the detection members' own layouts (write_sample_data), to time the host
pipeline and feed tests without the real sets. The full sizes get the official files: the MLPerf
OpenImages subset (<split>/data/<ImageID>.jpg, <split>/labels/openimages-mlperf.json with the 264
MLPerf classes, ids 0-263, boxes only) for retinanet, COCO 2017 (train2017/<id:012d>.jpg,
annotations/instances_<split>2017.json with COCO's 80 categories, ids 1-90, polygon masks) for
Mask R-CNN, at the sets' typical image sizes, JPEG bytes and objects per image. The pixels are
crops of a few smooth random textures (a 1/f spectrum, as photographs have), so a JPEG costs
about the bytes and decoding time of a photograph of its size; the boxes are random, so nothing
is learnable. The CPU tiers get their own mosaics (data/mosaic.py) in the same layouts."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from trainclock.workloads.detection.data.layout import COCO_NAMES, OPENIMAGES_LABELS, OPENIMAGES_NAMES, SplitFiles
from trainclock.workloads.detection.data.openimages_csv import MLPERF_CLASSES
from trainclock.workloads.detection.data.prepare import generate, labels_json
from trainclock.datasets.sample_pictures import cut, textures

JPEG_QUALITY = 90
TEXTURES = 6  # distinct textures the images are cut from; more only costs time


@dataclass(frozen=True)
class OfficialSet:
    layout: str  # "coco" or "openimages"
    sizes: tuple[tuple[int, int], ...]  # (width, height), drawn uniformly
    slope: float  # the textures' spectrum, amplitude ~ 1/f^slope: tuned to the set's mean bytes per JPEG
    objects: tuple[int, int]  # boxes per image, drawn uniformly from this range (inclusive)
    polygons: bool  # instance masks as COCO polygons
    group_share: float  # share of boxes (not an image's first) marked iscrowd (OpenImages: IsGroupOf)


# COCO 2017 train: 118,287 JPEGs in 18 GB (about 160 KB each), mostly 640 on the long side (640x480 and
# 640x427 the most common); 860,001 objects over the 117,266 images that have any, 7.3 each
COCO = OfficialSet("coco", ((640, 480), (640, 480), (640, 427), (480, 640), (640, 424), (427, 640), (500, 375),
                            (640, 512)), 1.07, (1, 13), True, 0.0)
# OpenImages as the ssd reference downloads it (CVDF's copy: 513 GB over 1,743,042 train images, about
# 290 KB each), at most 1024 on the long side, mostly 4:3 and 3:2; OpenImages V4 has 8.4 boxes per image
# over 600 classes: fewer of the MLPerf 264 (an estimate, 6.5), some of them group-of boxes
OPENIMAGES = OfficialSet("openimages", ((1024, 768), (1024, 768), (1024, 683), (768, 1024), (1024, 576),
                                        (683, 1024), (1024, 1024)), 1.28, (1, 12), False, 0.05)
OFFICIAL = {s.layout: s for s in (COCO, OPENIMAGES)}


def split_paths(root: Path, layout: str, split: str) -> SplitFiles:
    """Where a split's labels and images go in `layout` (layout.split_files finds them there)."""
    if layout == "coco":
        return SplitFiles(root / "annotations" / f"instances_{COCO_NAMES[split]}.json", root / COCO_NAMES[split])
    folder = root / OPENIMAGES_NAMES[split]
    return SplitFiles(folder / "labels" / OPENIMAGES_LABELS, folder / "data")


def write_images(folder: Path, pictures: Iterable[tuple[str, Callable[[Path], None]]]) -> None:
    """Each (name, function that saves it there), run on a thread per core (PIL's encoders release
    the GIL), a bounded number at a time, so pictures drawn lazily are not all held at once."""
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        pending = []
        for name, save in pictures:
            pending.append(pool.submit(save, folder / name))
            if len(pending) >= 64:
                pending.pop(0).result()
        for job in pending:
            job.result()


def write_labels(path: Path, labels: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(labels))


def jpeg(pixels: np.ndarray) -> Callable[[Path], None]:
    return lambda path: Image.fromarray(pixels).save(path, "JPEG", quality=JPEG_QUALITY)


def official_categories(layout: str) -> list[dict]:
    """The official category lists: COCO's 80 (ids 1-90 with gaps, torchvision's names) or the
    MLPerf OpenImages 264 (ids 0-263, in the reference's order)."""
    if layout == "openimages":
        return [{"id": i, "name": name} for i, name in enumerate(MLPERF_CLASSES)]
    from torchvision.models.detection import MaskRCNN_ResNet50_FPN_Weights  # its metadata only: nothing is downloaded

    names = MaskRCNN_ResNet50_FPN_Weights.COCO_V1.meta["categories"]  # index = COCO id; "N/A" where COCO has none
    return [{"id": i, "name": name} for i, name in enumerate(names) if i and name != "N/A"]


def objects(rng: np.random.Generator, official: OfficialSet, width: int, height: int, image_id: int, first_id: int,
            category_ids: Sequence[int]) -> list[dict]:
    """An image's annotations: boxes of log-uniform size (16 px to 70% of the short side: COCO's and
    OpenImages' many small objects and a few large ones), aspect 1:2 to 2:1; with polygons, a star-shaped
    blob of 8-20 vertices inside each box, the box being its extent, as COCO's boxes are the masks'."""
    out = []
    for k in range(int(rng.integers(official.objects[0], official.objects[1] + 1))):
        side = np.exp(rng.uniform(np.log(16), np.log(0.7 * min(width, height))))
        aspect = np.exp(rng.uniform(-0.7, 0.7))
        w, h = min(side * np.sqrt(aspect), width - 1), min(side / np.sqrt(aspect), height - 1)
        x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
        entry = {"id": first_id + k, "image_id": image_id, "category_id": int(rng.choice(category_ids)),
                 "iscrowd": int(k > 0 and rng.random() < official.group_share)}
        if official.polygons:
            angles = np.sort(rng.uniform(0, 2 * np.pi, int(rng.integers(8, 21))))
            radius = rng.uniform(0.55, 1.0, angles.size)
            xs = x + w / 2 * (1 + radius * np.cos(angles))
            ys = y + h / 2 * (1 + radius * np.sin(angles))
            x, y, w, h = xs.min(), ys.min(), xs.max() - xs.min(), ys.max() - ys.min()
            entry["segmentation"] = [np.round(np.stack([xs, ys], 1).ravel(), 2).tolist()]
            entry["area"] = round(float(0.5 * abs(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1)))), 2)
        else:
            entry["area"] = round(float(w * h), 2)
        entry["bbox"] = [round(float(v), 2) for v in (x, y, w, h)]
        out.append(entry)
    return out


def file_names(rng: np.random.Generator, layout: str, count: int) -> list[tuple[int, str]]:
    """(image id, file name): COCO's 12-digit ids; OpenImages' 16-hex ImageIDs, numbered in their
    sorted order as the reference's export (and openimages_csv) numbers them."""
    if layout == "coco":
        ids = sorted(int(i) for i in rng.choice(np.arange(1, 600_000), count, replace=False))
        return [(i, f"{i:012d}.jpg") for i in ids]
    hexes = sorted({f"{int(v):016x}" for v in rng.integers(0, 2 ** 63, count)})
    return [(n, f"{h}.jpg") for n, h in enumerate(hexes, 1)]


def draw(rng: np.random.Generator, official: OfficialSet, bases: list[np.ndarray], category_ids: Sequence[int],
         count: int, images: list[dict], annotations: list[dict]) -> Iterator[tuple[str, Callable[[Path], None]]]:
    """A split's pictures, drawn lazily (thousands would not fit in memory), each appending its
    image entry and annotations to the labels' lists."""
    for image_id, name in file_names(rng, official.layout, count):
        width, height = official.sizes[int(rng.integers(len(official.sizes)))]
        images.append({"id": image_id, "file_name": name, "height": height, "width": width, "license": 1})
        annotations += objects(rng, official, width, height, image_id, len(annotations) + 1, category_ids)
        yield name, jpeg(cut(rng, bases, (width, height)))


def write_official(root: Path, layout: str, samples: int, seed: int) -> Path:
    """The full size's official set: `samples` training images and one validation image (the
    smallest evaluation the job takes), each with 1 or more boxes."""
    official = OFFICIAL[layout]
    rng = np.random.default_rng([seed, 2017])
    largest = max(max(size) for size in official.sizes)
    bases = textures(rng, min(TEXTURES, samples + 1), largest * 5 // 4, official.slope)  # room for many crops
    cats = official_categories(layout)
    for split, count in (("train", samples), ("val", 1)):
        images: list[dict] = []
        annotations: list[dict] = []
        files = split_paths(root, layout, split)
        write_images(files.images, draw(rng, official, bases, [c["id"] for c in cats], count, images, annotations))
        write_labels(files.labels, {"info": {"description": "trainclock sample data (random)", "version": "1.0"},
                                    "licenses": [{"id": 1, "name": "none", "url": ""}],
                                    "images": images, "annotations": annotations, "categories": cats})
    return root


def write_mosaics(root: Path, layout: str, train: int, val: int, side: int, seed: int = 0,
                  categories: int | None = None, val_first_id: int = 1000) -> Path:
    """A CPU tier's data: Fashion-MNIST mosaics (PNG, RLE masks) in `layout`; with `categories`, the
    labels list that many classes (ids 1..n), of which the mosaics use the first ten."""
    for split, count, first_id in (("train", train, 1), ("val", val, val_first_id)):
        mosaics = generate(count, side, seed, split)
        names = [f"{first_id + i:08d}.png" for i in range(count)]
        labels = labels_json(mosaics, names, first_id)
        if categories is not None:
            labels["categories"] = [{"id": k + 1, "name": f"class {k + 1}"} for k in range(categories)]
        files = split_paths(root, layout, split)
        write_images(files.images, [(name, lambda path, m=m: Image.fromarray(m.image).save(path, compress_level=1))
                                    for m, name in zip(mosaics, names)])
        write_labels(files.labels, labels)
    return root
