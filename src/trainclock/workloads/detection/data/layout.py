"""The official layouts and their labels: COCO 2017 (annotations/instances_<split>2017.json beside
<split>2017/ images) and the MLPerf OpenImages subset (<split>/labels/openimages-mlperf.json beside
<split>/data/ images; split "train" or "validation"), both COCO-format instances JSON. A split
is read once into per-image records; a mask model trains on each object's outline (outlines.py),
and masks() decodes full masks where a tool or test needs them. Every field the run uses is
checked as the file is read (a bad one is a DataError naming the file and the annotation), boxes
are clipped to their image, and polygons and RLEs are checked before pycocotools sees them (it
crashes on some: far-out polygons segfault, garbled RLEs overrun their buffer)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

from trainclock.errors import DataError, require_folder

COCO_NAMES = {"train": "train2017", "val": "val2017"}
OPENIMAGES_NAMES = {"train": "train", "val": "validation"}
OPENIMAGES_LABELS = "openimages-mlperf.json"


@dataclass(frozen=True)
class SplitFiles:
    labels: Path
    images: Path


def split_files(root: Path, split: str) -> SplitFiles:
    """Where a split's labels and images are, in whichever official layout `root` holds."""
    root = require_folder(root, "give a folder in the COCO 2017 or MLPerf OpenImages layout")
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
    boxes: np.ndarray  # n x 4 float32, x1 y1 x2 y2, clipped to the image
    labels: np.ndarray  # n int64, contiguous class indices (see Split.label_of)
    segmentations: list  # per box: COCO polygons or RLE, checked at load (outlines.py, masks()); None if absent

    def masks(self) -> np.ndarray:
        """n x height x width uint8 instance masks."""
        out = np.zeros((len(self.segmentations), self.height, self.width), np.uint8)
        for i, seg in enumerate(self.segmentations):
            if seg is None:
                raise DataError(f"image {self.file}: box {i} has no segmentation (a mask model needs one per box)")
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
    category_ids: list[int]  # contiguous label -> category id (the training split's, for both splits of a run)
    first_label: int  # 1 where label 0 is the background (Mask R-CNN), 0 for RetinaNet

    def category_of(self, label: int) -> int:
        return self.category_ids[label - self.first_label]


POLYGON_REACH = 4  # polygon coordinates lie within this many image sizes of the origin
MAX_COORDINATE = 2 ** 24  # and never further: pycocotools rasterizes at 5x in 32-bit integers
FIX = "fix or remove it"


def pixel_limit() -> int | None:
    """The most pixels PIL opens (over it: DecompressionBombError), or None where that check is off."""
    return None if Image.MAX_IMAGE_PIXELS is None else 2 * int(Image.MAX_IMAGE_PIXELS)


def load_split(root: Path, split: str, first_label: int, keep_empty: bool, categories: list[int] | None = None,
               masks: bool | None = None) -> Split:
    """A split's images with their non-crowd boxes (clipped to the image; boxes left empty are
    dropped); images without any are dropped unless `keep_empty` (evaluation scores every image,
    as COCOeval does). `categories`: the training split's category ids, which label this split too
    (a category id outside them is an error). `masks`: True where every box needs a valid
    segmentation (Mask R-CNN), False where they are ignored, None: checked where present. Every
    problem is a DataError now, at load, never a crash mid-run."""
    files = split_files(root, split)
    data = _read(files.labels)
    where = files.labels
    own = _category_ids(where, data["categories"])
    if categories is None:
        categories = own
    else:
        lacking = sorted(set(own) - set(categories))
        if lacking:
            raise DataError(f"{where} lists category id {lacking[0]}, which the training split lacks: a run labels "
                            f"both splits by the training split's category ids ({len(categories)} of them); use "
                            "the same categories list in both labels files")
    known = set(own)
    label = {c: first_label + i for i, c in enumerate(categories)}
    images = _images(where, data["images"])
    per_image: dict[int, list[tuple]] = {i: [] for i in images}
    for n, a in enumerate(data["annotations"]):
        entry = _annotation(where, n, a, images, known, masks, evaluation=keep_empty)
        if entry is not None:
            per_image[a["image_id"]].append(entry)
    records = []
    for image_id in sorted(images):
        anns, (file_name, height, width) = per_image[image_id], images[image_id]
        if not anns and not keep_empty:
            continue
        boxes = np.array([box for box, _, _ in anns], np.float32).reshape(-1, 4)
        labels = np.array([label[category] for _, category, _ in anns], np.int64)
        records.append(ImageRecord(image_id, files.images / file_name, height, width, boxes, labels,
                                   [seg for _, _, seg in anns]))
    if not records:
        raise DataError(f"{where} lists no images with boxes")
    return Split(files, records, list(categories), first_label)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError(f"the file holds a JSON {type(data).__name__}, not an object")
        for key in ("images", "annotations", "categories"):
            if not isinstance(data[key], list):
                raise TypeError(f"{key!r} is a JSON {_kind(data[key])}, not a list")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise DataError(f"{path} is not a COCO-format instances file ({type(e).__name__}: {e})") from None
    return data


def _kind(value) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _integer(value) -> bool:
    return type(value) is int


def _number(value) -> float | None:
    """A JSON number as a float (inf for one too large), None for anything else."""
    if type(value) not in (int, float):
        return None
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def _category_ids(where: Path, categories: list) -> list[int]:
    ids = []
    for c in categories:
        if not isinstance(c, dict) or not _integer(c.get("id")):
            raise DataError(f"{where}: category {c!r:.60} has no integer id: {FIX}")
        ids.append(c["id"])
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"{where}: category id {twice} is listed twice: {FIX}")
    return sorted(ids)


def _images(where: Path, images: list) -> dict[int, tuple[str, int, int]]:
    """image id -> (file name, height, width)."""
    out = {}
    limit = pixel_limit()
    for n, image in enumerate(images):
        if not isinstance(image, dict) or not _integer(image.get("id")):
            raise DataError(f"{where}: image #{n} ({image!r:.60}) has no integer id: {FIX}")
        name = f"{where}: image {image['id']}"
        sides = []
        for key in ("height", "width"):
            value = _number(image.get(key))
            if value is None or not np.isfinite(value) or value < 1 or value != int(value) or value >= 2 ** 31:
                raise DataError(f"{name} has no valid {key} (a positive whole number of pixels), got "
                                f"{image.get(key)!r:.40}: {FIX}")
            sides.append(int(value))
        height, width = sides
        if limit is not None and height * width > limit:
            raise DataError(f"{name} is {width}x{height} by its labels: over PIL's decompression-bomb limit of "
                            f"{limit:,} pixels; resize the image or remove it")
        if not isinstance(image.get("file_name"), str) or not image["file_name"]:
            raise DataError(f"{name} has no file_name: {FIX}")
        if image["id"] in out:
            raise DataError(f"{name} is listed twice: {FIX}")
        out[image["id"]] = (image["file_name"], height, width)
    return out


def _annotation(where: Path, n: int, a, images: dict, categories: set[int], masks: bool | None,
                evaluation: bool) -> tuple | None:
    """(x1 y1 x2 y2 clipped, category id, segmentation) of a usable box; None for one skipped: on an
    image the file does not list, crowd, or empty once clipped. A malformed annotation is a DataError."""
    if not isinstance(a, dict):
        raise DataError(f"{where}: annotation #{n} is a JSON {_kind(a)}, not an object: {FIX}")
    name = f"{where}: annotation {a['id']}" if _integer(a.get("id")) else f"{where}: annotation #{n}"
    if not _integer(a.get("id")) or not _integer(a.get("image_id")):
        raise DataError(f"{name} has no integer id and image_id: {FIX}")
    if a["image_id"] not in images:
        return None
    _, height, width = images[a["image_id"]]
    bbox = a.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4 or any(_number(v) is None for v in bbox):
        raise DataError(f"{name}: bbox must be [x, y, width, height], 4 numbers, got {bbox!r:.60}: {FIX}")
    x, y, w, h = (_number(v) for v in bbox)
    if not all(np.isfinite(v) for v in (x, y, w, h)):
        raise DataError(f"{name}: bbox {bbox} holds a non-finite number: {FIX}")
    if not _integer(a.get("category_id")) or a["category_id"] not in categories:
        raise DataError(f"{name} names category {a.get('category_id')!r:.40}, which is not among its categories: "
                        f"{FIX}")
    if evaluation and (_number(a.get("area")) is None or not np.isfinite(_number(a["area"]))):
        raise DataError(f"{name} has no area (COCOeval needs it): {FIX}")
    segmentation = None
    if masks is not False and (masks or "segmentation" in a):
        segmentation = a.get("segmentation")
        problem = segmentation_problem(segmentation, height, width)
        if problem:
            raise DataError(f"{name}: {problem}: {FIX}")
    if a.get("iscrowd", 0):
        return None
    # clipped to the image, as the references' transforms do; a box with nothing inside is dropped
    x1, x2 = min(max(x, 0.0), width), min(max(x + w, 0.0), width)
    y1, y2 = min(max(y, 0.0), height), min(max(y + h, 0.0), height)
    # compared as stored (float32): a sliver that rounds to zero width would make the box loss's log(0)
    if not (np.float32(x2) > np.float32(x1) and np.float32(y2) > np.float32(y1)):
        return None
    return (x1, y1, x2, y2), a["category_id"], segmentation


def segmentation_problem(seg, height: int, width: int) -> str | None:
    """What is wrong with a COCO segmentation (polygons or RLE) of a height x width image, so that
    pycocotools never sees one it would crash on (None: it is fine)."""
    if isinstance(seg, list):
        if not seg:
            return "segmentation lists no polygon"
        reach = min(POLYGON_REACH * max(height, width), MAX_COORDINATE)
        for polygon in seg:
            try:
                points = np.asarray(polygon) if isinstance(polygon, list) else None
            except (ValueError, TypeError, OverflowError):
                points = None
            if points is None or points.ndim != 1 or points.dtype.kind not in "iuf":
                return f"a polygon must be a list of numbers, got {polygon!r:.40}"
            if len(points) < 6 or len(points) % 2:
                return f"a polygon has {len(points)} coordinates, not an even count of at least 6 (3 points)"
            points = points.astype(np.float64)
            if not np.isfinite(points).all():
                return "a polygon holds a non-finite number"
            if np.abs(points).max() > reach:
                return (f"a polygon reaches {np.abs(points).max():g}, far outside the {width}x{height} image "
                        f"(at most {reach:,} allowed)")
        return None
    if isinstance(seg, dict):
        size, counts = seg.get("size"), seg.get("counts")
        if size != [height, width] or not all(_integer(v) for v in size):
            return f"RLE size {size!r:.40} is not the image's [height, width], [{height}, {width}]"
        if isinstance(counts, str):
            runs = rle_runs(counts)
        elif isinstance(counts, list) and all(_integer(c) for c in counts):
            runs = counts
        else:
            return "RLE counts must be a string or a list of integers"
        if runs is None or any(r < 0 for r in runs) or sum(runs) != height * width:
            return f"RLE counts are garbled or do not cover the image's {height}x{width} pixels exactly"
        return None
    return f"segmentation must be a list of polygons or an RLE object, got a JSON {_kind(seg)}"


def rle_runs(counts: str) -> list[int] | None:
    """The run lengths of a compressed RLE string, as pycocotools' rleFrString reads them (None for
    a string it would misread: a character out of its range, a value too long, or cut off)."""
    runs: list[int] = []
    value = shift = 0
    for char in counts:
        c = ord(char) - 48
        if not 0 <= c < 64 or shift > 25:
            return None
        value |= (c & 0x1F) << shift
        shift += 5
        if not c & 0x20:
            if c & 0x10:
                value -= 1 << shift  # sign-extended
            if len(runs) > 2:
                value += runs[-2]
            runs.append(value)
            value = shift = 0
    return runs if shift == 0 else None
