"""The FLOPs the cost model counts per training image are those the models run: a direct count
(FlopCounterMode) of a real training step on mosaics agrees with the cost model's parts at the RoIs
the step's heads saw, and the members' expected RoIs keep the estimate near the direct count."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tests.workloads.detection.files import write_layout
from trainclock.workloads.detection.cost import expected_rois, forward_costs, train_flops_per_image
from trainclock.workloads.detection.data.layout import load_split
from trainclock.workloads.detection.data.loader import TrainBatches
from trainclock.workloads.detection.model import build_model
from trainclock.workloads.detection.spec import get_member

IMAGES = 4


def direct_count(tmp_path, member: str, benchmark: str) -> tuple[float, dict[str, int]]:
    """(training FLOPs per image of one step, RoIs the box and mask heads ran on)."""
    spec = get_member(member, benchmark)
    masks = benchmark == "maskrcnn"
    root = write_layout(tmp_path, "coco", train=IMAGES, val=1, side=spec.shape.min_size)
    split = load_split(root, "train", first_label=1 if masks else 0, keep_empty=False)
    batch = TrainBatches(split, 0, IMAGES, masks=masks)(0, slice(0, IMAGES))
    torch.manual_seed(0)
    model = build_model(spec.shape).train()
    rois = {"box": 0, "mask": 0}
    if masks:
        for name, head in (("box", model.roi_heads.box_head), ("mask", model.roi_heads.mask_head)):
            head.register_forward_hook(lambda m, i, o, name=name: rois.__setitem__(name, i[0].shape[0]))
    with FlopCounterMode(display=False) as counter:
        sum(model(batch["images"], batch["targets"]).values()).backward()
    return counter.get_total_flops() / IMAGES, rois


def test_retinanet_count_is_what_a_training_step_runs(tmp_path):
    direct, _ = direct_count(tmp_path, "retinanet-tiny", "ssd")
    assert train_flops_per_image(get_member("retinanet-tiny", "ssd")) == pytest.approx(direct, rel=0.05)


def test_maskrcnn_counts_the_heads_on_the_rois_they_run_on(tmp_path):
    spec = get_member("maskrcnn-tiny", "maskrcnn")
    direct, rois = direct_count(tmp_path, "maskrcnn-tiny", "maskrcnn")
    assert rois["box"] == IMAGES * spec.shape.roi_batch and 0 < rois["mask"] <= rois["box"] / 4
    parts = forward_costs(spec.shape)
    assert 3 * parts.total(rois["box"] / IMAGES, rois["mask"] / IMAGES) == pytest.approx(direct, rel=0.05)
    # the mask head on every positive the sampling allows (a quarter of 32) counted 2.4x too much
    assert 3 * parts.total(*expected_rois(spec.shape)) < 2 * direct
    assert train_flops_per_image(spec) < 3 * parts.total(spec.shape.roi_batch, spec.shape.roi_batch / 4)


def test_full_maskrcnn_expects_fewer_positives_than_the_sampling_allows():
    shape = get_member("maskrcnn-r50", "maskrcnn").shape
    box, mask = expected_rois(shape)
    assert box == shape.roi_batch and 0 < mask < box / 4
