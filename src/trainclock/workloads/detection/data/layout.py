"""The official layouts and their labels: COCO 2017 (annotations/instances_<split>2017.json beside
<split>2017/ images) and the MLPerf OpenImages subset (<split>/labels/openimages-mlperf.json beside
<split>/data/ images; split "train" or "validation"), both COCO-format instances JSON. A split
is read once into per-image records; masks are decoded only for a model that needs them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

from trainclock.errors import DataError

COCO_NAMES = {"train": "train2017", "val": "val2017"}
OPENIMAGES_NAMES = {"train": "train", "val": "validation"}
OPENIMAGES_LABELS = "openimages-mlperf.json"


@dataclass(frozen=True)
class SplitFiles:
    labels: Path
    images: Path


def split_files(root: Path, split: str) -> SplitFiles:
    """Where a split's labels and images are, in whichever official layout `root` holds."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DataError(f"{root} does not exist or is not a folder")
    coco = SplitFiles(root / "annotations" / f"instances_{COCO_NAMES[split]}.json", root / COCO_NAMES[split])
    openimages = SplitFiles(root / OPENIMAGES_NAMES[split] / "labels" / OPENIMAGES_LABELS,
                            root / OPENIMAGES_NAMES[split] / "data")
    for files in (coco, openimages):
        if files.labels.is_file():
            return files
    raise DataError(f"{root} holds neither COCO's {coco.labels.relative_to(root)} nor the MLPerf OpenImages "
                    f"{openimages.labels.relative_to(root)}")


@dataclass
class ImageRecord:
    id: int
    file: Path
    height: int
    width: int
    boxes: np.ndarray  # n x 4 float32, x1 y1 x2 y2
    labels: np.ndarray  # n int64, contiguous class indices (see Split.label_of)
    segmentations: list  # per box: COCO polygons or RLE (decoded by masks())

    def masks(self) -> np.ndarray:
        """n x height x width uint8 instance masks."""
        out = np.zeros((len(self.segmentations), self.height, self.width), np.uint8)
        for i, seg in enumerate(self.segmentations):
            if isinstance(seg, list):
                rle = mask_utils.merge(mask_utils.frPyObjects(seg, self.height, self.width))
            elif isinstance(seg.get("counts"), list):
                rle = mask_utils.frPyObjects(seg, self.height, self.width)
            else:
                rle = seg
            out[i] = mask_utils.decode(rle)
        return out


@dataclass
class Split:
    files: SplitFiles
    records: list[ImageRecord]
    category_ids: list[int]  # contiguous label -> the JSON's category id
    first_label: int  # 1 where label 0 is the background (Mask R-CNN), 0 for RetinaNet

    def category_of(self, label: int) -> int:
        return self.category_ids[label - self.first_label]


def load_split(root: Path, split: str, first_label: int, keep_empty: bool) -> Split:
    """A split's images with their non-crowd boxes; images without any are dropped unless
    `keep_empty` (evaluation scores every image, as COCOeval does)."""
    files = split_files(root, split)
    try:
        data = json.loads(files.labels.read_text())
        categories = sorted(c["id"] for c in data["categories"])
        images = {i["id"]: i for i in data["images"]}
        annotations = data["annotations"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"{files.labels} is not a COCO-format instances file ({type(e).__name__}: {e})") from None
    label = {c: first_label + i for i, c in enumerate(categories)}
    per_image: dict[int, list[dict]] = {i: [] for i in images}
    for a in annotations:
        if a.get("iscrowd", 0) or a.get("image_id") not in per_image:
            continue
        x, y, w, h = a["bbox"]
        if w > 0 and h > 0:
            per_image[a["image_id"]].append(a)
    records = []
    for image_id in sorted(images):
        anns, info = per_image[image_id], images[image_id]
        if not anns and not keep_empty:
            continue
        boxes = np.array([[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]]
                          for a in anns], np.float32).reshape(-1, 4)
        try:
            labels = np.array([label[a["category_id"]] for a in anns], np.int64)
        except KeyError as e:
            raise DataError(f"{files.labels}: an annotation names category {e} that is not among its categories") from None
        records.append(ImageRecord(image_id, files.images / info["file_name"], int(info["height"]), int(info["width"]),
                                   boxes, labels, [a.get("segmentation", []) for a in anns]))
    if not records:
        raise DataError(f"{files.labels} lists no images with boxes")
    return Split(files, records, categories, first_label)
