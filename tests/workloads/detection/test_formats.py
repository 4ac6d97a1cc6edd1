"""The COCO and OpenImages-MLPerf layouts on tiny files the tests write: boxes, labels and masks
come back exactly (the masks' extents are the boxes), crowd and empty boxes are skipped, training
drops images without boxes while evaluation keeps them, and broken input is one clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.workloads.detection.files import boxes_of, whole_image, write_layout
from trainclock.errors import DataError
from trainclock.workloads.detection.data.layout import load_split, split_files
from trainclock.workloads.detection.data.loader import EvalBatches, TrainBatches, hflip, read_image


@pytest.mark.parametrize("layout", ["coco", "openimages"])
def test_both_layouts_load_exact_boxes_and_masks(tmp_path, layout):
    root = write_layout(tmp_path, layout)
    files = split_files(root, "val")
    expected = "annotations/instances_val2017.json" if layout == "coco" else "validation/labels/openimages-mlperf.json"
    assert files.labels == root / expected
    split = load_split(root, "train", first_label=1, keep_empty=False)
    assert len(split.records) == 6 and split.category_ids == list(range(1, 11))
    for record in split.records:
        masks = record.masks()
        assert masks.shape == (len(record.boxes), 32, 32)
        np.testing.assert_array_equal(boxes_of(masks), record.boxes)  # boxes are the masks' extents
        assert record.labels.min() >= 1 and read_image(record).shape == (3, 32, 32)


def test_crowd_and_empty_boxes_are_skipped_and_evaluation_keeps_empty_images(tmp_path):
    root = write_layout(tmp_path, "coco")
    labels = root / "annotations" / "instances_train2017.json"
    data = json.loads(labels.read_text())
    first = data["images"][0]["id"]
    for a in data["annotations"]:
        if a["image_id"] == first:
            a["iscrowd"] = 1
    data["annotations"][-1]["bbox"] = [1, 1, 0, 3]
    data["annotations"].append({"id": 999, "image_id": first, "category_id": 3, "bbox": [2, 2, 4, 4], "area": 16,
                                "iscrowd": 0, "segmentation": [[2, 2, 6, 2, 6, 6, 2, 6]]})  # a polygon
    labels.write_text(json.dumps(data))
    split = load_split(root, "train", first_label=0, keep_empty=False)
    record = next(r for r in split.records if r.id == first)
    assert record.labels.tolist() == [2] and record.boxes.tolist() == [[2, 2, 6, 6]]
    assert record.masks()[0, 2:6, 2:6].all() and record.masks().sum() == 16
    val = load_split(root, "val", first_label=0, keep_empty=True)
    assert [r.id for r in val.records] == [1000, 1001, 1002, 1003]


def test_flip_and_batches_are_a_function_of_seed_and_step(tmp_path):
    root = write_layout(tmp_path, "coco")
    split = load_split(root, "train", first_label=1, keep_empty=False)
    whole = TrainBatches(split, 3, 4, masks=True)(5, slice(0, 4))
    half = TrainBatches(split, 3, 4, masks=True)(5, slice(2, 4))  # a second rank, or a resume at step 5
    assert len(half["images"]) == 2
    for a, b in zip(whole["images"][2:], half["images"]):
        assert torch.equal(a, b)
    image, target = whole["images"][0], whole["targets"][0]
    again, back = hflip(*hflip(image, target))
    assert torch.equal(again, image) and torch.equal(back["boxes"], target["boxes"])
    masks = whole_image(target, image.shape[-1])  # the outlines rasterised at one cell a pixel: the masks
    np.testing.assert_array_equal(boxes_of(masks.numpy()), target["boxes"].numpy())
    assert torch.equal(whole_image(back, image.shape[-1]), masks)
    shards = [EvalBatches(load_split(root, "val", 1, True), 3, (r, 2)) for r in range(2)]
    ids = [i for s in shards for _, batch in s for i in batch]
    assert sorted(i for i in ids if i >= 0) == [1000, 1001, 1002, 1003] and ids.count(-1) == 2


def test_bad_data_is_one_line(tmp_path):
    with pytest.raises(DataError, match="neither COCO's annotations/instances_train2017.json"):
        split_files(tmp_path, "train")
    with pytest.raises(DataError, match="does not exist"):
        split_files(tmp_path / "nope", "train")
    root = write_layout(tmp_path / "d", "openimages")
    (root / "train" / "labels" / "openimages-mlperf.json").write_text('{"images": []}')
    with pytest.raises(DataError, match="not a COCO-format instances file"):
        load_split(root, "train", 0, False)
    record = load_split(root, "val", 0, True).records[0]
    record.file.write_bytes(b"not a png")
    with pytest.raises(DataError, match="cannot decode image"):
        read_image(record)
