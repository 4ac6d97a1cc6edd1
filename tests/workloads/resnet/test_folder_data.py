"""The ImageNet folder layout, the reference transforms and the step loader, on JPEG trees the
tests write: a fixed class and file order, one-line errors for a bad tree or a broken file,
torchvision's eval transform, and batches that depend only on (seed, step), whatever the ranks,
workers or restarts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image

from tests.workloads.resnet.trees import truncate, write_tree
from trainclock.errors import DataError
from trainclock.workloads.resnet.data.folder import scan
from trainclock.workloads.resnet.data.loader import EvalLoader, StepLoader
from trainclock.workloads.resnet.data.transforms import ImageTransforms, crop_box, eval_image, train_image

SMALL = ImageTransforms(crop=16, resize=18)


def test_scan_numbers_classes_in_sorted_order_and_lists_files_in_order(tmp_path):
    folder = scan(write_tree(tmp_path, classes=3, per_class=2, val_per_class=1))
    assert folder.classes == ("n00000000", "n00000001", "n00000002")
    assert folder.train.labels == (0, 0, 1, 1, 2, 2) and folder.val.labels == (0, 1, 2)
    assert list(folder.train.files) == sorted(folder.train.files)


@pytest.mark.parametrize("damage, message", [
    (lambda root: None, "does not exist"),
    (lambda root: root.mkdir(), "val"),
    (lambda root: (root / "train").mkdir(parents=True), "no class folders"),
    (lambda root: (root / "train" / "cat").mkdir(parents=True), "has no images"),
])
def test_a_bad_tree_is_one_line_naming_the_problem(tmp_path, damage, message):
    root = tmp_path / "data"
    damage(root)
    with pytest.raises(DataError, match=message) as e:
        scan(root)
    assert "\n" not in str(e.value)


def test_val_classes_must_be_train_classes(tmp_path):
    root = write_tree(tmp_path)
    (root / "val" / "zebra").mkdir()
    Image.new("RGB", (8, 8)).save(root / "val" / "zebra" / "z.JPEG")
    with pytest.raises(DataError, match="classes that train/ lacks"):
        scan(root)


def test_eval_transform_is_torchvisions_resize_and_center_crop(tmp_path):
    root = write_tree(tmp_path, size=(50, 37))
    path = scan(root).val.files[0]
    expected = T.Compose([T.Resize(18), T.CenterCrop(16), T.PILToTensor()])(Image.open(path).convert("RGB"))
    assert torch.equal(eval_image(path, SMALL), expected)


def test_train_transform_is_deterministic_per_sample_and_random_across_samples(tmp_path):
    path = scan(write_tree(tmp_path, size=(60, 45))).train.files[0]
    one = train_image(path, SMALL, np.random.default_rng([1, 7, 1]))
    again = train_image(path, SMALL, np.random.default_rng([1, 7, 1]))
    other = train_image(path, SMALL, np.random.default_rng([1, 8, 1]))
    assert one.shape == (3, 16, 16) and one.dtype == torch.uint8
    assert torch.equal(one, again) and not torch.equal(one, other)


def test_random_resized_crop_boxes_stay_inside_and_within_the_scale_range():
    rng = np.random.default_rng(0)
    t = ImageTransforms(crop=224, resize=256)
    for _ in range(500):
        top, left, h, w = crop_box(rng, 500, 375, t)
        assert 0 <= top and top + h <= 375 and 0 <= left and left + w <= 500
        assert 0.08 * 0.99 <= h * w / (500 * 375) <= 1.0


def test_two_ranks_and_workers_see_the_rows_one_process_sees(tmp_path):
    split = scan(write_tree(tmp_path, classes=2, per_class=5)).train  # 10 images: batches cross epochs
    whole = StepLoader(split, SMALL, seed=3, global_batch=4, rows=slice(0, 4), workers=0)
    halves = [StepLoader(split, SMALL, seed=3, global_batch=4, rows=slice(r * 2, r * 2 + 2), workers=1) for r in (0, 1)]
    for step in range(6):
        full = whole(step, slice(0, 4))
        parts = [h(step, slice(r * 2, r * 2 + 2)) for r, h in enumerate(halves)]
        assert torch.equal(full["image"], torch.cat([p["image"] for p in parts]))
        assert torch.equal(full["label"], torch.cat([p["label"] for p in parts]))
    # each epoch visits every image once
    seen = [whole.dataset.position(k) for k in range(10)]
    assert sorted(seen) == list(range(10))


def test_a_restart_at_any_step_gives_that_steps_batch(tmp_path):
    split = scan(write_tree(tmp_path)).train
    running = StepLoader(split, SMALL, seed=5, global_batch=4, rows=slice(0, 4), workers=1)
    rows = slice(0, 4)
    expected = [running(s, rows)["image"] for s in range(5)]
    resumed = StepLoader(split, SMALL, seed=5, global_batch=4, rows=slice(0, 4), workers=1)
    assert torch.equal(resumed(3, rows)["image"], expected[3]) and torch.equal(resumed(4, rows)["image"], expected[4])
    assert resumed(4, rows) is resumed(4, rows)  # the warm-up's batch is step 0's: not drawn twice


def test_a_truncated_jpeg_is_a_one_line_error_through_the_workers(tmp_path):
    root = write_tree(tmp_path)
    folder = scan(root)
    for path in folder.train.files + folder.val.files:
        truncate(__import__("pathlib").Path(path))
    loader = StepLoader(folder.train, SMALL, seed=1, global_batch=4, rows=slice(0, 4), workers=1)
    with pytest.raises(DataError, match="cannot decode image .*JPEG.*replace or delete") as e:
        loader(0, slice(0, 4))
    assert "\n" not in str(e.value)
    with pytest.raises(DataError, match="cannot decode image"):
        list(EvalLoader(folder.val, SMALL, micro=2, shard=(0, 1), workers=1))


def test_eval_shards_cover_the_set_once_with_equal_forwards(tmp_path):
    val = scan(write_tree(tmp_path, classes=3, val_per_class=3)).val  # 9 images over 2 ranks
    labels = [torch.cat([y for _, y in EvalLoader(val, SMALL, micro=2, shard=(r, 2), workers=0)]) for r in (0, 1)]
    assert len(labels[0]) == len(labels[1]) == 6  # 3 forwards of 2 on each rank
    counted = torch.cat([y[y >= 0] for y in labels])
    assert counted.tolist() == list(val.labels)
