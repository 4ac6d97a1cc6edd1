"""OpenImages v6's CSVs become the MLPerf OpenImages layout the loader reads (tiny CSVs and JPEGs the
test writes): the 264 MLPerf classes in the reference's order, their boxes in pixels, IsGroupOf as
crowd, other classes and their images dropped; `trainclock data prepare ssd --data RAW` converts,
a run pointed at unconverted CSVs says how to convert; bad or damaged CSVs are one DataError line."""

from __future__ import annotations

import json
import random

import pytest
from PIL import Image

from trainclock import cli
from trainclock.errors import DataError, UsageError
from trainclock.workloads.detection.data import openimages_csv
from trainclock.workloads.detection.data.layout import load_split
from trainclock.workloads.detection.data.openimages_csv import MLPERF_CLASSES, convert
from trainclock.workloads.detection.workload import official_folder

HEADER = "ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax,IsOccluded,IsTruncated,IsGroupOf,IsDepiction,IsInside"
SIZES = {"a1": (40, 20), "a2": (10, 10), "a3": (8, 8), "b1": (16, 32)}
BOXES = {"train": ["a1,xclick,/m/c0,1,0.25,0.75,0.5,1,0,0,0,0,0",  # Airplane: 10-30 x 10-20 of 40x20
                   "a1,xclick,/m/c2,1,0,1,0,0.5,0,0,1,0,0",  # Apple, a group: crowd
                   "a2,xclick,/m/c263,1,0.1,0.2,0.3,0.4,0,0,0,0,0",
                   "a3,xclick,/m/other,1,0,1,0,1,0,0,0,0,0"],  # not an MLPerf class: a3 has nothing left
         "validation": ["b1,xclick,/m/c5,1,0,0.5,0,0.5,0,0,0,0,0"]}


def write_raw(root, boxes=BOXES):
    lines = [f"/m/c{i},{name}" for i, name in enumerate(MLPERF_CLASSES)] + ["/m/other,Unicorn"]
    (root / "class-descriptions-boxable.csv").write_text("\n".join(lines) + "\n")
    for split, rows in boxes.items():
        (root / f"{split}-annotations-bbox.csv").write_text("\n".join([HEADER, *rows]) + "\n")
        (root / split).mkdir(exist_ok=True)
        for image_id, size in SIZES.items():
            Image.new("RGB", size, (9, 9, 9)).save(root / split / f"{image_id}.jpg")
    return root


def test_csvs_become_the_mlperf_layout(tmp_path):
    raw = write_raw(tmp_path)
    with pytest.raises(UsageError, match="trainclock data prepare ssd --data"):
        official_folder(raw, convert=False)  # a run does not convert 1.7M images by itself
    assert cli.main(["data", "prepare", "ssd", "--data", str(raw)]) == 0
    folder = official_folder(raw, convert=False)
    labels = json.loads((folder / "train/labels/openimages-mlperf.json").read_text())
    assert [c["name"] for c in labels["categories"]] == list(MLPERF_CLASSES)
    assert [c["id"] for c in labels["categories"]] == list(range(264))
    assert [i["file_name"] for i in labels["images"]] == ["a1.jpg", "a2.jpg"]
    split = load_split(folder, "train", first_label=0, keep_empty=False)
    first = split.records[0]
    assert (first.width, first.height) == (40, 20) and first.file.is_file()
    assert first.boxes.tolist() == [[10, 10, 30, 20]] and first.labels.tolist() == [0]  # the group is crowd
    assert split.category_of(split.records[1].labels[0]) == 263
    assert load_split(folder, "val", first_label=0, keep_empty=True).records[0].boxes.tolist() == [[0, 0, 8, 16]]


@pytest.mark.parametrize("change, message", [
    (lambda rows: [rows[0].replace(",0.25,", ",1.25,")], "not inside"),
    (lambda rows: ["a1,xclick,/m/nope,1,0,1,0,1,0,0,0,0,0"], "not in class-descriptions"),
    (lambda rows: ["a1,xclick,/m/c0,1,zero,1,0,1,0,0,0,0,0"], "must be numbers"),
])
def test_bad_rows_are_one_line(tmp_path, change, message):
    raw = write_raw(tmp_path, {**BOXES, "train": change(BOXES["train"])})
    with pytest.raises(DataError, match=message):
        convert(raw)
    assert not openimages_csv.converted_folder(raw).exists()  # nothing half-written is left as converted


def test_missing_columns_and_files_are_one_line(tmp_path):
    raw = write_raw(tmp_path)
    (raw / "validation-annotations-bbox.csv").write_text("ImageID,LabelName\nb1,/m/c5\n")
    with pytest.raises(DataError, match="no column XMin"):
        convert(raw)
    (raw / "validation-annotations-bbox.csv").unlink()
    with pytest.raises(DataError, match="validation-annotations-bbox.csv"):
        convert(raw)


def test_damaged_csvs_are_a_data_error_never_a_traceback(tmp_path):
    raw = write_raw(tmp_path)
    rng = random.Random(0)
    files = [raw / "class-descriptions-boxable.csv", raw / "train-annotations-bbox.csv"]
    originals = {f: f.read_bytes() for f in files}
    for trial in range(40):
        target = rng.choice(files)
        data = originals[target]
        if trial % 2:
            data = data[:rng.randrange(len(data))]
        else:
            cut = rng.randrange(len(data))
            data = data[:cut] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 30))) + data[cut:]
        target.write_bytes(data)
        try:
            convert(raw, force=True)
        except DataError as e:
            assert "\n" not in str(e)
        target.write_bytes(originals[target])
