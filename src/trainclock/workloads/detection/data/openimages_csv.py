"""OpenImages v6's CSVs turned into the MLPerf OpenImages layout, as the ssd reference's
download_openimages_mlperf.sh / fiftyone_openimages.py export it: per split, data/<ImageID>.jpg and
labels/openimages-mlperf.json, a COCO-format file whose categories are the MLPerf 264 classes in
the script's order (ids 0-263: the reference feeds category_id to the model as its label), whose
images are those with at least one box of them, and whose annotations are those boxes in pixels
with iscrowd = IsGroupOf. The raw folder holds class-descriptions-boxable.csv (LabelName,
DisplayName; no header), <split>-annotations-bbox.csv (or oidv6-train-annotations-bbox.csv; the
columns below, coordinates in [0, 1]) and the images in train/ and validation/. The converted
folder (keyed by the CSVs' path, sizes and modification times: an edited CSV is converted anew)
is written through storage.staged_folder, its marker last, so a folder holding it is complete."""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from trainclock.errors import DataError
from trainclock.storage import build_once, cache_key, discard_folder, prepared_path
from trainclock.workloads.detection.data.layout import OPENIMAGES_LABELS, OPENIMAGES_NAMES, pixel_limit

CLASS_FILE = "class-descriptions-boxable.csv"
BOX_FILES = {"train": ("oidv6-train-annotations-bbox.csv", "train-annotations-bbox.csv"),
             "val": ("validation-annotations-bbox.csv",)}
COLUMNS = ("ImageID", "LabelName", "XMin", "XMax", "YMin", "YMax", "IsGroupOf")
MLPERF_CLASSES = (
    "Airplane", "Antelope", "Apple", "Backpack", "Balloon", "Banana", "Barrel", "Baseball bat", "Baseball glove",
    "Bee", "Beer", "Bench", "Bicycle", "Bicycle helmet", "Bicycle wheel", "Billboard", "Book", "Bookcase", "Boot",
    "Bottle", "Bowl", "Bowling equipment", "Box", "Boy", "Brassiere", "Bread", "Broccoli", "Bronze sculpture",
    "Bull", "Bus", "Bust", "Butterfly", "Cabinetry", "Cake", "Camel", "Camera", "Candle", "Candy", "Cannon",
    "Canoe", "Carrot", "Cart", "Castle", "Cat", "Cattle", "Cello", "Chair", "Cheese", "Chest of drawers", "Chicken",
    "Christmas tree", "Coat", "Cocktail", "Coffee", "Coffee cup", "Coffee table", "Coin", "Common sunflower",
    "Computer keyboard", "Computer monitor", "Convenience store", "Cookie", "Countertop", "Cowboy hat", "Crab",
    "Crocodile", "Cucumber", "Cupboard", "Curtain", "Deer", "Desk", "Dinosaur", "Dog", "Doll", "Dolphin", "Door",
    "Dragonfly", "Drawer", "Dress", "Drum", "Duck", "Eagle", "Earrings", "Egg (Food)", "Elephant", "Falcon",
    "Fedora", "Flag", "Flowerpot", "Football", "Football helmet", "Fork", "Fountain", "French fries", "French horn",
    "Frog", "Giraffe", "Girl", "Glasses", "Goat", "Goggles", "Goldfish", "Gondola", "Goose", "Grape", "Grapefruit",
    "Guitar", "Hamburger", "Handbag", "Harbor seal", "Headphones", "Helicopter", "High heels", "Hiking equipment",
    "Horse", "House", "Houseplant", "Human arm", "Human beard", "Human body", "Human ear", "Human eye",
    "Human face", "Human foot", "Human hair", "Human hand", "Human head", "Human leg", "Human mouth", "Human nose",
    "Ice cream", "Jacket", "Jeans", "Jellyfish", "Juice", "Kitchen & dining room table", "Kite", "Lamp", "Lantern",
    "Laptop", "Lavender (Plant)", "Lemon", "Light bulb", "Lighthouse", "Lily", "Lion", "Lipstick", "Lizard", "Man",
    "Maple", "Microphone", "Mirror", "Mixing bowl", "Mobile phone", "Monkey", "Motorcycle", "Muffin", "Mug", "Mule",
    "Mushroom", "Musical keyboard", "Necklace", "Nightstand", "Office building", "Orange", "Owl", "Oyster",
    "Paddle", "Palm tree", "Parachute", "Parrot", "Pen", "Penguin", "Personal flotation device", "Piano",
    "Picture frame", "Pig", "Pillow", "Pizza", "Plate", "Platter", "Porch", "Poster", "Pumpkin", "Rabbit", "Rifle",
    "Roller skates", "Rose", "Salad", "Sandal", "Saucer", "Saxophone", "Scarf", "Sea lion", "Sea turtle", "Sheep",
    "Shelf", "Shirt", "Shorts", "Shrimp", "Sink", "Skateboard", "Ski", "Skull", "Skyscraper", "Snake", "Sock",
    "Sofa bed", "Sparrow", "Spider", "Spoon", "Sports uniform", "Squirrel", "Stairs", "Stool", "Strawberry",
    "Street light", "Studio couch", "Suit", "Sun hat", "Sunglasses", "Surfboard", "Sushi", "Swan", "Swimming pool",
    "Swimwear", "Tank", "Tap", "Taxi", "Tea", "Teddy bear", "Television", "Tent", "Tie", "Tiger", "Tin can", "Tire",
    "Toilet", "Tomato", "Tortoise", "Tower", "Traffic light", "Train", "Tripod", "Truck", "Trumpet", "Umbrella",
    "Van", "Vase", "Vehicle registration plate", "Violin", "Wall clock", "Waste container", "Watch", "Whale",
    "Wheel", "Wheelchair", "Whiteboard", "Window", "Wine", "Wine glass", "Woman", "Zebra", "Zucchini",
)


def is_csv_folder(root: Path) -> bool:
    return (Path(root).expanduser() / CLASS_FILE).is_file()


def read_classes(path: Path) -> tuple[set[str], dict[str, int]]:
    """(every LabelName (/m/...) in the file, LabelName -> MLPerf class index for the MLPerf classes)."""
    index = {name: i for i, name in enumerate(MLPERF_CLASSES)}
    known, found = set(), {}
    for line, row in _rows(path, csv.reader):
        if len(row) != 2 or not row[0]:
            raise DataError(f"{path}:{line}: expected LabelName,DisplayName, got {len(row)} fields")
        known.add(row[0])
        if row[1] in index:
            found[row[0]] = index[row[1]]
    missing = set(index) - {MLPERF_CLASSES[i] for i in found.values()}
    if missing:
        raise DataError(f"{path} lacks {len(missing)} of the MLPerf classes, e.g. {sorted(missing)[0]!r}")
    return known, found


def read_boxes(path: Path, known: set[str], classes: dict[str, int]) -> dict[str, list[tuple]]:
    """ImageID -> [(class, x1, y1, x2, y2, group), ...] in [0, 1], the MLPerf classes' boxes only."""
    boxes: dict[str, list[tuple]] = {}
    for line, row in _rows(path, csv.DictReader):
        label = row["LabelName"]
        if label not in known:
            raise DataError(f"{path}:{line}: class {label!r} is not in {CLASS_FILE}")
        if label not in classes:
            continue
        try:
            x1, x2, y1, y2 = (float(row[c]) for c in ("XMin", "XMax", "YMin", "YMax"))
            group = int(row["IsGroupOf"])
        except (TypeError, ValueError):
            raise DataError(f"{path}:{line}: coordinates and IsGroupOf must be numbers") from None
        if not (0 <= x1 <= x2 <= 1 and 0 <= y1 <= y2 <= 1) or group not in (0, 1):
            raise DataError(f"{path}:{line}: box ({x1}, {y1})-({x2}, {y2}) is not inside [0, 1] in order, "
                            "or IsGroupOf is not 0/1")
        boxes.setdefault(row["ImageID"], []).append((classes[label], x1, y1, x2, y2, group))
    return boxes


def _rows(path: Path, reader):
    """(line, row) of a CSV file; a DictReader's header must have COLUMNS. Unreadable text is a DataError."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = reader(f)
            if isinstance(rows, csv.DictReader):
                absent = [c for c in COLUMNS if c not in (rows.fieldnames or ())]
                if absent:
                    raise DataError(f"{path} has no column {absent[0]} (a bbox annotations CSV has "
                                    f"{', '.join(COLUMNS)})")
            for row in rows:
                yield rows.line_num, row
    except OSError as e:
        raise DataError(f"cannot read {path} ({e.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise DataError(f"{path} is not a UTF-8 CSV file ({e})") from None


def _box_file(raw: Path, split: str) -> Path:
    for name in BOX_FILES[split]:
        if (raw / name).is_file():
            return raw / name
    raise DataError(f"{raw} has no {' or '.join(BOX_FILES[split])}")


def labels_json(boxes: dict[str, list[tuple]], images: Path, data: Path) -> dict:
    """The split's COCO-format labels; each image is linked (or copied) into `data`."""
    out_images, annotations = [], []
    for number, image_id in enumerate(sorted(boxes), 1):
        source = images / f"{image_id}.jpg"
        try:
            with Image.open(source) as image:
                width, height = image.size
        except Image.DecompressionBombError:
            raise DataError(f"image {source} has more pixels than PIL's decompression-bomb limit "
                            f"({pixel_limit():,}): resize it or remove its rows from the CSVs") from None
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as e:
            raise DataError(f"cannot read image {source} ({type(e).__name__})") from None
        _link(source, data / source.name)
        out_images.append({"id": number, "file_name": source.name, "height": height, "width": width})
        for label, x1, y1, x2, y2, group in boxes[image_id]:
            w, h = (x2 - x1) * width, (y2 - y1) * height
            annotations.append({"id": len(annotations) + 1, "image_id": number, "category_id": label,
                                "bbox": [x1 * width, y1 * height, w, h], "area": w * h, "iscrowd": group})
    return {"images": out_images, "annotations": annotations,
            "categories": [{"id": i, "name": name} for i, name in enumerate(MLPERF_CLASSES)]}


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copyfile(source, target)


MARKER = "converted.json"  # written last: a folder holding it is complete


def source_files(raw: Path) -> list[Path]:
    """The CSVs a conversion reads (those present)."""
    names = [CLASS_FILE, *(name for names in BOX_FILES.values() for name in names)]
    return [raw / name for name in names if (raw / name).is_file()]


def _stamp(raw: Path) -> str:
    """The CSVs' names, sizes and modification times: an edited CSV is a new conversion."""
    parts = []
    for path in source_files(raw):
        stat = path.stat()
        parts.append(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return "\0\0".join(parts)


def _prefix(raw: Path) -> str:
    return f"openimages-mlperf-{cache_key(Path(raw).expanduser().resolve(), digits=10)}-"


def converted_folder(raw: Path) -> Path:
    """Where the conversion of `raw`'s CSVs as they are now lives (keyed by their path, sizes and mtimes)."""
    raw = Path(raw).expanduser()
    return prepared_path(_prefix(raw).removesuffix("-"), _stamp(raw), digits=10)


def is_converted(raw: Path) -> bool:
    return (converted_folder(raw) / MARKER).is_file()


def convert(raw: Path, force: bool = False) -> Path:
    """The MLPerf layout of the OpenImages CSV folder `raw` (made now if missing, if its CSVs changed
    since, or if `force`); conversions of older versions of the CSVs are removed."""
    raw = Path(raw).expanduser()
    folder = converted_folder(raw)
    if not force and (folder / MARKER).is_file():
        return folder

    def build(staging: Path) -> None:
        known, classes = read_classes(raw / CLASS_FILE)
        for split, name in OPENIMAGES_NAMES.items():
            boxes = read_boxes(_box_file(raw, split), known, classes)
            if not boxes:
                raise DataError(f"{_box_file(raw, split)} has no box of the MLPerf classes")
            data, labels = staging / name / "data", staging / name / "labels" / OPENIMAGES_LABELS
            data.mkdir(parents=True)
            labels.parent.mkdir(parents=True)
            labels.write_text(json.dumps(labels_json(boxes, raw / name, data)))
        (staging / MARKER).write_text(json.dumps({"raw": str(raw.resolve()), "sources": _stamp(raw).split("\0\0")}))

    build_once(folder, MARKER, build, force)
    for stale in folder.parent.glob(f"{_prefix(raw)}*"):  # conversions of the CSVs as they were before
        if stale.name != folder.name:
            discard_folder(stale)
    return folder
