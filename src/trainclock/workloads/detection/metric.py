"""COCO mAP over the whole validation set: each data-parallel rank returns its images' detections
as COCO result dicts (EvalShard.gathered), the loop concatenates them over ranks, and COCOeval
scores them against the split's labels JSON, as the references do (box mAP @[.5:.95], and mask
mAP from run-length-encoded masks for Mask R-CNN). The COCOeval is faster-coco-eval's where it is
installed (a dependency): the same twelve stats as pycocotools' to 1e-6
(tests/workloads/detection/test_coco_eval_agreement.py) in an eighth of the CPU time for boxes and
a third for masks at val2017's size (benchmarks/coco_eval_speed.py); pycocotools' otherwise."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import torch
from pycocotools import mask as mask_utils
from torch import nn

from trainclock.workload.base import EvalShard


try:  # the ground truth's COCO from the evaluator's own library, as the agreement test pairs them
    from faster_coco_eval import COCO
    from faster_coco_eval import COCOeval_faster as COCOeval

    FASTER = True
except ImportError:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    FASTER = False

MASK_THRESHOLD = 0.5  # Mask R-CNN's mask probabilities become masks here, as the reference pastes them


@cache
def ground_truth(labels: Path) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        return COCO(str(labels))


def evaluator_for(gt: COCO, results: list[dict], kind: str) -> COCOeval:
    if not FASTER:
        return COCOeval(gt, gt.loadRes(results), kind)
    # it computes mask IoUs on up to 8 threads: no more than the run gave torch, so an evaluation
    # beside other work (the CPU tiers' one-thread processes) takes no more cores than the training did
    return COCOeval(gt, gt.loadRes(results), kind, print_function=lambda *_: None,
                    rle_iou_max_workers=max(1, torch.get_num_threads()))


def coco_map(gt: COCO, results: Sequence[dict], kind: str) -> float:
    """mAP@[.5:.95] of `results` (COCO result dicts) against `gt`; 0 with no detections at all."""
    if not results:
        return 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        evaluator = evaluator_for(gt, list(results), kind)
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return float(max(evaluator.stats[0], 0.0))  # -1 means no ground truth of any class


def detections(outputs: list[dict], image_ids: Sequence[int], category_of, masks: bool) -> list[dict]:
    """COCO result dicts of a batch's outputs (boxes in the original image's pixels)."""
    results = []
    for out, image_id in zip(outputs, image_ids):
        if image_id < 0:  # a padding image
            continue
        boxes = out["boxes"].float().cpu()
        xywh = torch.cat([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], 1).tolist()
        scores, labels = out["scores"].float().cpu().tolist(), out["labels"].cpu().tolist()
        rles = []
        if masks:
            binary = (out["masks"][:, 0] > MASK_THRESHOLD).cpu().numpy().astype(np.uint8)
            rles = mask_utils.encode(np.asfortranarray(binary.transpose(1, 2, 0))) if len(binary) else []
        for i, (box, score, label) in enumerate(zip(xywh, scores, labels)):
            entry = {"image_id": int(image_id), "category_id": int(category_of(label)), "bbox": box, "score": score}
            if masks:
                entry["segmentation"] = {"size": rles[i]["size"], "counts": rles[i]["counts"].decode()}
            results.append(entry)
    return results


def predict(model: nn.Module, batches, autocast, device: torch.device, category_of, masks: bool) -> EvalShard:
    """A rank's detections over its batches of (images, image ids)."""
    found: list[dict] = []
    for images, ids in batches:
        with autocast():
            outputs = model([i.to(device, non_blocking=True) for i in images])
        found += detections(outputs, ids, category_of, masks)
    return EvalShard(gathered=found)


def score(gt: COCO, results: Sequence[dict], names: dict[str, str]) -> dict[str, float]:
    """{metric name: mAP} for each COCOeval kind in `names` ({"bbox": "mAP"}, or BBOX and SEGM);
    mask mAP scores the masks alone (their areas, not the boxes', decide COCO's size ranges)."""
    out = {}
    for kind, name in names.items():
        if kind == "segm":
            chosen = [{k: v for k, v in r.items() if k != "bbox"} for r in results]
        else:
            chosen = [{k: v for k, v in r.items() if k != "segmentation"} for r in results]
        out[name] = coco_map(gt, chosen, kind)
    return out
