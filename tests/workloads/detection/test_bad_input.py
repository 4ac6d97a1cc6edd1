"""Bad detection labels, images and CSVs are one DataError line at load, before a run starts, never
a traceback, a crash (pycocotools segfaults on some polygons) or silent wrong output: validation
categories are the training split's ids, boxes are clipped to their image, polygons and RLEs are
checked before pycocotools sees them, and the OpenImages CSV conversion is redone when a CSV changes.
A fuzz test mutates small valid COCO and OpenImages-MLPerf labels files: they load, or are refused."""

from __future__ import annotations

import copy
import json
import math
import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from tests.workloads.detection.files import write_layout
from tests.workloads.detection.test_openimages_csv import write_raw
from tests.workloads.helpers import trainclock
from trainclock.errors import DataError, UsageError
from trainclock.workloads.detection.data import openimages_csv
from trainclock.workloads.detection.data.layout import load_split, rle_runs
from trainclock.workloads.detection.data.loader import read_image
from trainclock.workloads.detection.data.openimages_csv import convert
from trainclock.workloads.detection.metric import detections, ground_truth, score
from trainclock.workloads.detection.spec import get_member
from trainclock.workloads.detection.workload import load_splits, official_folder

SSD = get_member("retinanet-tiny", "ssd")
MASKRCNN = get_member("maskrcnn-tiny", "maskrcnn")
TRAIN = "annotations/instances_train2017.json"
VAL = "annotations/instances_val2017.json"


def edit(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def refused(spec, root, *words):
    """The DataError that loading `root` for `spec` raises: one line, naming the file and `words`."""
    with pytest.raises(DataError) as error:
        load_splits(spec, root)
    message = str(error.value)
    assert "\n" not in message and "instances_" in message, message
    for word in words:
        assert word in message, message
    return message


# 1. categories: by the training split's ids


def test_validation_is_labelled_by_the_training_splits_category_ids(tmp_path):
    root = write_layout(tmp_path, "coco")  # ten categories, ids 1-10, in both splits

    def without_category_3(data):
        data["categories"] = [c for c in data["categories"] if c["id"] != 3]
        for a in data["annotations"]:
            if a["category_id"] == 3:
                a["category_id"] = 4

    edit(root / VAL, without_category_3)
    train, val = load_splits(SSD, root)
    assert train.category_ids == list(range(1, 11))
    for label in range(10):  # the model's label 5 is category 6 ("sandal") in both, label 9 category 10
        assert val.category_of(label) == train.category_of(label) == label + 1
    record = next(r for r in val.records if len(r.labels))
    assert [val.category_of(int(label)) for label in record.labels] == [
        a["category_id"] for a in json.loads((root / VAL).read_text())["annotations"]
        if a["image_id"] == record.id and not a["iscrowd"]]
    outputs = {"boxes": torch.tensor([[1.0, 1.0, 5.0, 5.0]]), "scores": torch.tensor([0.9]),
               "labels": torch.tensor([9])}
    [result] = detections([outputs], [record.id], val.category_of, masks=False)
    assert result["category_id"] == 10

    edit(root / VAL, lambda data: data["categories"].append({"id": 11, "name": "extra"}))
    refused(SSD, root, "instances_val2017.json", "category id 11", "training split lacks")


# 2. boxes: clipped to the image, empty ones dropped, non-finite ones refused


def test_boxes_are_clipped_to_the_image_and_empty_ones_dropped(tmp_path):
    root = write_layout(tmp_path, "coco")  # 32 x 32 images
    first = json.loads((root / TRAIN).read_text())["images"][0]["id"]
    # far off, partly in, larger than the image, inverted, and a sliver of no width once in float32
    extra = [[1000, -500, 5000, 4000], [-10, -10, 20, 20], [0, 0, 1e30, 1e30], [30, 31, 1e30, -5], [16, 2, 1e-7, 8]]

    def add(data):
        for k, bbox in enumerate(extra):
            data["annotations"].append({"id": 900 + k, "image_id": first, "category_id": 2, "bbox": bbox,
                                        "area": 1, "iscrowd": 0})

    edit(root / TRAIN, add)
    train, _ = load_splits(SSD, root)
    record = next(r for r in train.records if r.id == first)
    assert record.boxes.min() >= 0 and record.boxes.max() <= 32
    assert record.boxes[-2:].tolist() == [[0, 0, 10, 10], [0, 0, 32, 32]]  # far, inverted and sliver dropped
    assert (record.boxes[:, 2:] > record.boxes[:, :2]).all()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e400", "-1e999"])
def test_non_finite_boxes_are_refused_naming_the_annotation(tmp_path, value):
    root = write_layout(tmp_path, "coco")
    data = json.loads((root / TRAIN).read_text())
    ann = data["annotations"][1]
    text = json.dumps(data).replace(json.dumps(ann["bbox"]), f"[1, 2, {value}, 3]", 1)
    (root / TRAIN).write_text(text)
    refused(SSD, root, "instances_train2017.json", f"annotation {ann['id']}", "non-finite")


# 3. the OpenImages CSV conversion: keyed by the CSVs' sizes and mtimes, staged with a marker


def test_an_edited_csv_is_converted_again(tmp_path):
    raw = write_raw(tmp_path)
    first = convert(raw)
    assert (first / openimages_csv.MARKER).is_file()
    box_file = raw / "train-annotations-bbox.csv"
    box_file.write_text(box_file.read_text().replace(",0.25,0.75,0.5,1,", ",0,0.5,0.5,1,"))
    stat = box_file.stat()
    os.utime(box_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
    with pytest.raises(UsageError, match="changed since.*trainclock data prepare ssd --data"):
        official_folder(raw, convert=False)  # the run is not handed the old conversion
    second = convert(raw)
    assert second != first and not first.exists()  # the stale conversion is removed
    split = load_split(second, "train", first_label=0, keep_empty=False)
    assert split.records[0].boxes.tolist() == [[0, 10, 20, 20]]  # the edited box, not the cached one
    assert official_folder(raw, convert=False) == second and convert(raw) == second  # and then cached


def test_a_conversion_without_its_marker_is_redone(tmp_path):
    raw = write_raw(tmp_path)
    half = openimages_csv.converted_folder(raw)
    (half / "train").mkdir(parents=True)  # a half-written folder from a crash, or an older layout
    assert not openimages_csv.is_converted(raw)
    folder = convert(raw)
    assert folder == half and (folder / "train/labels/openimages-mlperf.json").is_file()


def drop(key):
    return lambda data: data["annotations"][0].pop(key)


def setter(where, key, value):
    return lambda data: where(data).__setitem__(key, value)


FIRST_ANNOTATION = lambda data: data["annotations"][0]  # noqa: E731
FIRST_IMAGE = lambda data: data["images"][0]  # noqa: E731


# 4. polygons pycocotools would crash on (a segmentation fault, exit 139)


@pytest.mark.parametrize("polygon, problem", [
    ([1e9, 1e9, -1e9, 5, 3, -1e9], "far outside"),  # frPyObjects segfaults on this one
    ([1e8, 1e8, -1e8, 5, 3, -1e8], "far outside"),
    ([1, 2, 3, 4, 5, float("nan")], "non-finite"),
    ([1, 2, 3, 4, 5], "not an even count"),
    ([1, 2], "not an even count"),  # 4 numbers would even be read as a box
    (["1", "2", "3", "4", "5", "6"], "list of numbers"),
    ("1,2,3,4,5,6", "list of numbers"),
    ([[1, 2], [3, 4], [5, 6]], "list of numbers"),
])
def test_bad_polygons_are_refused_before_pycocotools_sees_them(tmp_path, polygon, problem):
    root = write_layout(tmp_path, "coco")
    data = json.loads((root / TRAIN).read_text())
    ann = data["annotations"][0]
    ann["segmentation"] = [polygon]
    (root / TRAIN).write_text(json.dumps(data))
    refused(MASKRCNN, root, "instances_train2017.json", f"annotation {ann['id']}", problem)
    load_splits(SSD, root)  # RetinaNet never reads the masks


@pytest.mark.slow
def test_a_maskrcnn_run_on_the_polygon_that_crashed_pycocotools_stops_before_run_start(tmp_path):
    root = write_layout(tmp_path / "data", "coco")
    edit(root / TRAIN, setter(FIRST_ANNOTATION, "segmentation", [[1e9, 1e9, -1e9, 5, 3, -1e9]]))
    out = tmp_path / "out"
    done = trainclock("run", "maskrcnn-tiny", "--data", str(root), "--out", str(out), "--no-progress",
                      "--precision", "fp32", timeout=300, real_data=False)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])  # it was -11, a segmentation fault
    assert len(done.stderr.strip().splitlines()) == 1 and "far outside" in done.stderr
    assert "instances_train2017.json: annotation 1" in done.stderr
    assert not any("run_start" in f.read_text(errors="replace") for f in out.rglob("*") if f.is_file())


def test_good_polygons_and_rles_still_load(tmp_path):
    root = write_layout(tmp_path, "coco")
    data = json.loads((root / TRAIN).read_text())
    ann = data["annotations"][0]
    x, y, w, h = ann["bbox"]
    beyond = [-40, -40, 80, -40, 80, 80, -40, 80]  # reaches past the image: clipped
    ann["segmentation"] = [[x, y, x + w, y, x + w, y + h, x, y + h], beyond]
    (root / TRAIN).write_text(json.dumps(data))
    train, _ = load_splits(MASKRCNN, root)
    for record in train.records:
        assert record.masks().shape == (len(record.boxes), 32, 32)
    assert train.records[0].masks()[0].all()


# 5. reader errors that ended in tracebacks (or at the first batch)


@pytest.mark.parametrize("change, words", [
    (drop("bbox"), ["bbox"]),
    (setter(FIRST_ANNOTATION, "bbox", [1, 2, 3]), ["bbox", "4 numbers"]),
    (setter(FIRST_ANNOTATION, "bbox", None), ["bbox"]),
    (setter(FIRST_ANNOTATION, "bbox", ["1", 2, 3, 4]), ["bbox"]),
    (lambda data: FIRST_IMAGE(data).pop("height"), ["image 1", "height"]),
    (setter(FIRST_IMAGE, "width", "wide"), ["image 1", "width"]),
    (setter(FIRST_IMAGE, "width", 0), ["image 1", "width"]),
    (setter(lambda data: data, "annotations", {"1": {}}), ["'annotations' is a JSON object"]),
    (setter(lambda data: data, "annotations", "none"), ["'annotations' is a JSON string"]),
    (setter(lambda data: data, "images", None), ["'images' is a JSON null"]),
    (lambda data: data["annotations"].append("x"), ["is a JSON string"]),
    (setter(FIRST_ANNOTATION, "category_id", [3]), ["category"]),
    (setter(lambda data: data["categories"][0], "id", "1"), ["integer id"]),
    (lambda data: data["categories"].append(dict(data["categories"][0])), ["listed twice"]),
    (setter(lambda data: FIRST_ANNOTATION(data)["segmentation"], "counts", "!!!!garbage"), ["RLE counts"]),
    (setter(lambda data: FIRST_ANNOTATION(data)["segmentation"], "counts", "0"), ["RLE counts"]),
    (setter(lambda data: FIRST_ANNOTATION(data)["segmentation"], "counts", [100, 3]), ["RLE counts"]),
    (setter(lambda data: FIRST_ANNOTATION(data)["segmentation"], "counts", None), ["RLE counts"]),
    (setter(lambda data: FIRST_ANNOTATION(data)["segmentation"], "size", [64, 64]), ["RLE size"]),
    (setter(FIRST_ANNOTATION, "segmentation", {"size": [32, 32]}), ["RLE counts"]),
    (setter(FIRST_ANNOTATION, "segmentation", 7), ["segmentation must be"]),
    (setter(FIRST_ANNOTATION, "segmentation", []), ["no polygon"]),
    (drop("segmentation"), ["segmentation must be"]),
    (setter(FIRST_IMAGE, "height", 10_000_000), ["decompression-bomb"]),
])
def test_bad_labels_are_one_line_at_load(tmp_path, change, words):
    root = write_layout(tmp_path, "coco")
    edit(root / TRAIN, change)
    refused(MASKRCNN, root, "instances_train2017.json", *words)


def test_a_garbled_rle_in_the_validation_labels_is_refused_at_load(tmp_path):
    root = write_layout(tmp_path, "openimages")
    path = root / "validation/labels/openimages-mlperf.json"
    edit(path, setter(lambda data: data["annotations"][0]["segmentation"], "counts", "~~~~"))
    with pytest.raises(DataError, match="openimages-mlperf.json: annotation .*RLE counts"):
        load_splits(MASKRCNN, root)


def test_rle_runs_read_as_pycocotools_reads_them():
    from pycocotools import mask as mask_utils

    rng = np.random.default_rng(0)
    for _ in range(20):
        mask = np.asfortranarray(rng.random((13, 17)) < rng.random())
        rle = mask_utils.encode(mask.astype(np.uint8))
        runs = rle_runs(rle["counts"].decode())
        assert sum(runs) == 13 * 17 and min(runs) >= 0
        assert sum(runs[1::2]) == int(mask.sum())
    assert rle_runs("1") is not None and rle_runs("P") is None  # "P" (0x20 set) is cut off
    assert rle_runs("0" + chr(47)) is None and rle_runs("o" * 7 + "0") is None  # out of range, too long


def test_decompression_bombs_are_one_line_in_training_and_in_conversion(tmp_path, monkeypatch):
    root = write_layout(tmp_path / "mosaics", "coco")
    train, _ = load_splits(MASKRCNN, root)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 32 x 32 images are over twice that: an error, not a warning
    with pytest.raises(DataError, match=r"image .*\.png has more pixels than PIL's decompression-bomb limit"):
        read_image(train.records[0])
    with pytest.raises(DataError, match="decompression-bomb limit"):
        load_splits(MASKRCNN, root)  # the labels already say 32 x 32
    (tmp_path / "raw").mkdir()
    raw = write_raw(tmp_path / "raw")
    with pytest.raises(DataError, match=r"image .*\.jpg has more pixels than PIL's decompression-bomb limit"):
        convert(raw)
    assert not openimages_csv.is_converted(raw)


# fuzz: mutated labels load, or are refused with a DataError


WEIRD = (None, True, "x", "", [], {}, [1, 2, 3], [[1e9, 1e9, -1e9, 5, 3, -1e9]], 0, -1, 0.5, 1e30, -1e30,
         float("nan"), float("inf"), 2 ** 70, {"size": [32, 32], "counts": "0"}, [1e30, 0, 1e30, 1e30])
OPS = st.lists(st.tuples(st.sampled_from(["drop", "replace", "replace", "shorten"]),
                         st.lists(st.floats(0, 1, exclude_max=True), min_size=3, max_size=5),
                         st.sampled_from(range(len(WEIRD)))), min_size=1, max_size=3)


def mutate(data, path: list[float], op: str, weird):
    """Walk down `data` by the fractions in `path` (dict keys in order, list positions), then change
    the container reached there: drop a key or element, replace it by a weird value, or cut a list."""
    node = data
    for depth, f in enumerate(path):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = keys[int(f * len(keys))]
        child = node[key]
        if depth + 1 < len(path) and isinstance(child, (dict, list)) and child:
            node = child
            continue
        if op == "drop":
            del node[key]
        elif op == "shorten" and isinstance(child, list):
            del child[int(path[-1] * len(child)):]
        else:
            node[key] = copy.deepcopy(weird)
        return
    if isinstance(node, list):
        node.clear()


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """Small valid labels: the mosaics' COCO (RLE masks) and an OpenImages-MLPerf conversion's (boxes only)."""
    coco = write_layout(tmp_path_factory.mktemp("coco"), "coco", train=2, val=2)
    raw = write_raw(tmp_path_factory.mktemp("raw"))
    return {"coco": (coco, json.loads((coco / TRAIN).read_text()), json.loads((coco / VAL).read_text())),
            "raw": raw}


def fake_results(val, masks: bool) -> list[dict]:
    from pycocotools import mask as mask_utils

    out = []
    for record in val.records:
        box = {"image_id": record.id, "category_id": val.category_of(val.first_label), "bbox": [1.0, 1.0, 4.0, 4.0],
               "score": 0.9}
        if masks:
            mask = np.zeros((record.height, record.width), np.uint8)
            mask[1:5, 1:5] = 1
            rle = mask_utils.encode(np.asfortranarray(mask))
            box["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode()}
        out.append(box)
    return out


OUTCOMES: list[str] = []


def try_load(root):
    """Loads for both benchmarks, decodes every mask and scores fake detections: or a DataError."""
    for spec in (SSD, MASKRCNN):
        masks = spec is MASKRCNN
        try:
            train, val = load_splits(spec, root)
        except DataError as e:
            assert "\n" not in str(e) and str(root) in str(e)
            OUTCOMES.append(str(e)[len(str(root)):][:70])
            continue
        OUTCOMES.append("loaded")
        assert np.isfinite(train.records[0].boxes).all()
        for record in train.records + val.records:
            assert ((record.boxes[:, 2:] > record.boxes[:, :2]).all() and record.boxes.min(initial=0) >= 0
                    and (record.boxes[:, [2]] <= record.width).all() and (record.boxes[:, [3]] <= record.height).all())
            if masks:
                assert record.masks().shape[0] == len(record.boxes)
        ground_truth.cache_clear()
        names = {"bbox": "BBOX", "segm": "SEGM"} if masks else {"bbox": "mAP"}
        assert all(math.isfinite(v) for v in score(ground_truth(val.files.labels), fake_results(val, masks),
                                                   names).values())


@settings(derandomize=True, max_examples=100, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["coco train", "coco val", "openimages train", "openimages val"]), ops=OPS,
       cut=st.tuples(st.integers(0, 5), st.floats(0, 1, exclude_max=True)))
def test_mutated_labels_load_or_are_a_data_error(valid, tmp_path_factory, which, ops, cut):
    layout, split = which.split()
    if layout == "coco":
        source, train, val = valid["coco"]
        root = tmp_path_factory.mktemp("fuzz")
        (root / "annotations").mkdir()
        for name in ("train2017", "val2017"):
            (root / name).symlink_to(source / name)
        paths = {"train": root / TRAIN, "val": root / VAL}
        labels = {"train": copy.deepcopy(train), "val": copy.deepcopy(val)}
    else:
        folder = convert(valid["raw"])
        root = tmp_path_factory.mktemp("fuzz")
        paths = {}
        labels = {}
        for key, name in (("train", "train"), ("val", "validation")):
            (root / name / "labels").mkdir(parents=True)
            (root / name / "data").symlink_to(folder / name / "data")
            paths[key] = root / name / "labels" / "openimages-mlperf.json"
            labels[key] = json.loads((folder / name / "labels" / "openimages-mlperf.json").read_text())
    for op, path, weird in ops:
        mutate(labels[split], path, op, WEIRD[weird])
    for key in ("train", "val"):
        text = json.dumps(labels[key])
        if key == split and cut[0] == 0:  # a sixth of them cut off
            text = text[:int(cut[1] * len(text))]
        paths[key].write_text(text)
    try_load(root)
