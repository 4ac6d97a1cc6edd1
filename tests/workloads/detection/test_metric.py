"""COCO mAP: the workload's score of detections gathered from two ranks equals COCOeval run
directly on the same detections (box and mask mAP, to 1e-6), and a model's predictions become
COCO result dicts with the split's category ids and the masks' run-length encodings."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils
from pycocotools.cocoeval import COCOeval

from tests.workloads.detection.files import write_layout
from trainclock.workloads.detection.data.layout import load_split
from trainclock.workloads.detection.metric import detections, ground_truth, score


def direct(gt, results: list[dict], kind: str) -> float:
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator = COCOeval(gt, gt.loadRes(results), kind)
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return evaluator.stats[0]


def noisy_predictions(split, seed: int) -> list[dict]:
    """Each true object found with a jittered box and eroded mask, some wrong classes, some misses."""
    rng = np.random.default_rng(seed)
    out = []
    for record in split.records:
        masks = record.masks()
        for box, label, mask in zip(record.boxes, record.labels, masks):
            if rng.random() < 0.2:
                continue
            jitter = box + rng.normal(0, 1.5, 4)
            outputs = {"boxes": torch.tensor([jitter]), "scores": torch.tensor([rng.random()]),
                       "labels": torch.tensor([label if rng.random() < 0.8 else 1 + (label % 10)]),
                       "masks": torch.from_numpy(np.roll(mask, int(rng.integers(-1, 2)), 1)[None, None].astype(np.float32))}
            out += detections([outputs], [record.id], split.category_of, masks=True)
    return out


def test_score_of_gathered_predictions_is_cocoeval_on_them(tmp_path):
    root = write_layout(tmp_path, "coco", train=2, val=12, side=48)
    val = load_split(root, "val", first_label=1, keep_empty=True)
    gt = ground_truth(val.files.labels)
    rank0, rank1 = noisy_predictions(val, 0)[:10], noisy_predictions(val, 0)[10:]
    gathered = rank0 + rank1  # as the loop concatenates EvalShard.gathered in rank order
    got = score(gt, gathered, {"bbox": "BBOX", "segm": "SEGM"})
    boxes = [{k: v for k, v in r.items() if k != "segmentation"} for r in gathered]
    masks = [{k: v for k, v in r.items() if k != "bbox"} for r in gathered]
    assert got["BBOX"] == pytest.approx(direct(gt, boxes, "bbox"), abs=1e-6)
    assert got["SEGM"] == pytest.approx(direct(gt, masks, "segm"), abs=1e-6)
    assert 0.1 < got["BBOX"] < 0.95 and 0.1 < got["SEGM"] < 0.95
    assert score(gt, [], {"bbox": "mAP"}) == {"mAP": 0.0}


def test_detections_carry_category_ids_and_mask_encodings(tmp_path):
    root = write_layout(tmp_path, "openimages", train=2, val=2, side=32)
    val = load_split(root, "val", first_label=0, keep_empty=True)
    mask = np.zeros((1, 1, 32, 32), np.float32)
    mask[0, 0, 4:10, 6:9] = 0.9
    outputs = {"boxes": torch.tensor([[6.0, 4.0, 9.0, 10.0]]), "scores": torch.tensor([0.7]),
               "labels": torch.tensor([3]), "masks": torch.from_numpy(mask)}
    [result] = detections([outputs], [val.records[0].id], val.category_of, masks=True)
    assert result["category_id"] == 4 and result["bbox"] == pytest.approx([6, 4, 3, 6])
    assert mask_utils.area({"size": result["segmentation"]["size"],
                            "counts": result["segmentation"]["counts"].encode()}) == 18
    assert detections([outputs], [-1], val.category_of, masks=True) == []  # a padding image
