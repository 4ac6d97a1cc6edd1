"""faster-coco-eval's COCOeval, which metric.py scores with where it is installed, gives
pycocotools' twelve box and mask stats to 1e-6 on the same detections: a COCO-like set (polygon
masks, crowds as uncompressed RLE, COCO's 80 category ids) with detections of every quality,
duplicates, wrong classes and false positives (the speed benchmark's generator,
benchmarks/coco_eval_speed.py), plus what the generator never makes: an image without objects
that gets detections, and a category with detections and no objects."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("faster_coco_eval")

from trainclock.workloads.detection import metric  # noqa: E402

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "coco_eval_speed.py"


def benchmark_module():
    spec = importlib.util.spec_from_file_location("coco_eval_speed", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


speed = benchmark_module()


def with_edge_cases(gt: dict, results: list[dict]) -> tuple[dict, list[dict]]:
    unused = 91  # past COCO's ids: listed, never labelled
    gt = {**gt, "images": gt["images"] + [{"id": 10**7, "file_name": "empty.jpg", "height": 480, "width": 640}],
          "categories": gt["categories"] + [{"id": unused, "name": "never labelled"}]}
    donor = results[0]
    extra = [{**donor, "image_id": 10**7, "score": 0.9},  # a confident false positive on an empty image
             {**donor, "category_id": unused, "score": 0.8}]  # a class that has no objects
    return gt, results + extra


@pytest.fixture(scope="module")
def mask_rcnn() -> tuple[dict, list[dict]]:
    # 60 detections per image: Mask R-CNN's 100 would only add low-scored false positives
    gt, results = speed.evaluation_set(200, 60, masks=True, seed=1)
    return with_edge_cases(gt, results)


@pytest.fixture(scope="module")
def reference(mask_rcnn) -> dict[str, np.ndarray]:
    """pycocotools' twelve stats per kind (the slow half, computed once)."""
    return {kind: speed.timed(speed.pycocotools_stats, *mask_rcnn, kind)[0] for kind in ("bbox", "segm")}


@pytest.mark.parametrize("kind", ["bbox", "segm"])
def test_faster_coco_eval_gives_pycocotools_stats(mask_rcnn, reference, kind):
    faster, _, _ = speed.timed(speed.faster_stats, *mask_rcnn, kind)
    assert len(reference[kind]) == len(faster) == 12
    np.testing.assert_allclose(faster, reference[kind], rtol=0, atol=1e-6)
    assert 0.2 < reference[kind][0] < 0.8  # detections of every quality: neither all found nor none


def test_boxes_only_at_retinanet_density():
    gt, results = with_edge_cases(*speed.evaluation_set(50, 300, masks=False, seed=2))
    reference, _, _ = speed.timed(speed.pycocotools_stats, gt, results, "bbox")
    faster, _, _ = speed.timed(speed.faster_stats, gt, results, "bbox")
    np.testing.assert_allclose(faster, reference, rtol=0, atol=1e-6)


def test_workload_score_is_pycocotools_map(mask_rcnn, reference, tmp_path):
    """metric.score, through the labels file as the workload reads it, with the workload's evaluator."""
    gt, results = mask_rcnn
    labels = tmp_path / "instances_val2017.json"
    labels.write_text(json.dumps(gt))
    assert metric.FASTER  # the dependency is installed, so the workload scores with it
    got = metric.score(metric.ground_truth(labels), results, {"bbox": "BBOX", "segm": "SEGM"})
    assert got["BBOX"] == pytest.approx(reference["bbox"][0], abs=1e-6)
    assert got["SEGM"] == pytest.approx(reference["segm"][0], abs=1e-6)


def test_pycocotools_scores_where_faster_coco_eval_is_missing(mask_rcnn, reference, tmp_path, monkeypatch):
    gt, results = mask_rcnn
    labels = tmp_path / "instances_val2017.json"
    labels.write_text(json.dumps(gt))
    monkeypatch.setitem(sys.modules, "faster_coco_eval", None)  # its import now fails
    try:
        fallback = importlib.reload(metric)
        assert not fallback.FASTER
        got = fallback.score(fallback.ground_truth(labels), results, {"bbox": "BBOX"})
    finally:
        monkeypatch.undo()
        importlib.reload(metric)  # the other tests' module as it was
    assert metric.FASTER
    assert got["BBOX"] == pytest.approx(reference["bbox"][0], abs=1e-6)
