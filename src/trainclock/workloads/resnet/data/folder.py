"""The ImageNet folder layout: <root>/train/<class>/*.JPEG and <root>/val/<class>/*.JPEG, classes
numbered in sorted order of the train folder's class names (as torchvision's ImageFolder does).
Everything a user can get wrong about the tree is refused here, before the run, in one line."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import DataError, require_folder

EXTENSIONS = (".jpeg", ".jpg", ".png")
LAYOUT = "train/<class>/*.JPEG and val/<class>/*.JPEG"


@dataclass(frozen=True)
class Split:
    files: tuple[str, ...]  # sorted by class then name: a fixed order every rank agrees on
    labels: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.files)


@dataclass(frozen=True)
class ImageFolder:
    root: Path
    classes: tuple[str, ...]
    train: Split
    val: Split


def _images(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return sorted(e.path for e in entries if e.is_file() and e.name.lower().endswith(EXTENSIONS))


def _split(root: Path, name: str, classes: tuple[str, ...] | None) -> tuple[tuple[str, ...], Split]:
    folder = root / name
    if not folder.is_dir():
        raise DataError(f"{folder} is missing: the data folder must hold the ImageNet layout {LAYOUT}")
    found = tuple(sorted(e.name for e in os.scandir(folder) if e.is_dir()))
    if not found:
        raise DataError(f"{folder} has no class folders: put each class's images in {name}/<class>/ ({LAYOUT})")
    if classes is not None and set(found) - set(classes):
        extra = ", ".join(sorted(set(found) - set(classes))[:3])
        raise DataError(f"{folder} has classes that train/ lacks ({extra}); both splits need the same class folders")
    if classes is not None and set(classes) - set(found):
        missing = ", ".join(sorted(set(classes) - set(found))[:3])
        raise DataError(f"{folder} lacks class folders that train/ has ({missing}); both splits need the same class "
                        f"folders (an empty one is allowed in {name}/)")
    classes = classes or found
    files: list[str] = []
    labels: list[int] = []
    for label, cls in enumerate(classes):
        images = _images(folder / cls) if (folder / cls).is_dir() else []
        if name == "train" and not images:
            raise DataError(f"{folder / cls} has no images (.JPEG/.jpg/.png); remove the class or add its images")
        files += images
        labels += [label] * len(images)
    if name == "train" and len(classes) < 2:  # torchmetrics would refuse it at the first evaluation, mid-run
        raise DataError(f"{folder} has {len(classes)} class folder ({classes[0]}); a classifier needs at least 2 "
                        f"classes: add the other classes' folders ({LAYOUT})")
    if not files:
        raise DataError(f"{folder} holds no images (.JPEG/.jpg/.png) in its class folders ({LAYOUT})")
    return classes, Split(tuple(files), tuple(labels))


def scan(root: str | Path) -> ImageFolder:
    root = require_folder(root, f"give a folder with the ImageNet layout {LAYOUT}")
    classes, train = _split(root, "train", None)
    _, val = _split(root, "val", classes)
    return ImageFolder(root, classes, train, val)
