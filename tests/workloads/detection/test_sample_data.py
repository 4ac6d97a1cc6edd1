"""write_sample_data: made-up sets in the official layouts (the MLPerf OpenImages subset for
retinanet, COCO 2017 for Mask R-CNN) at the real sets' image sizes and JPEG bytes, that the full
sizes' jobs read as they would read the real ones: float images of the files' sizes, boxes and
labels (and Mask R-CNN's masks), resized by the model to 800x800 (ssd's closed rules) or to a short
side of 800 and a long one of at most 1333 (maskrcnn's); and a tier's own mosaics."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from PIL import Image

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.detection import WORKLOADS

SSD, MASKRCNN = WORKLOADS
META = torch.device("meta")


def job_on(workload, member: str, data: str):
    settings = RunSettings(data=data)
    spec = workload.resolve(member, settings, Layout(), META)
    return workload.build_job(spec, single_process(), META, 0, settings)


def check_targets(batch: dict, classes: int, masks: bool) -> None:
    for image, target in zip(batch["images"], batch["targets"]):
        assert image.dtype == torch.float32 and image.shape[0] == 3 and 0 <= image.min() and image.max() <= 1
        boxes = target["boxes"]
        assert boxes.dtype == torch.float32 and boxes.shape[1] == 4 and len(boxes) >= 1
        assert (boxes[:, 2:] > boxes[:, :2]).all() and (boxes[:, 2] <= image.shape[2]).all()
        assert target["labels"].dtype == torch.int64 and target["labels"].max() < classes
        if masks:  # an outline an object (objects, parts, edges, 4), each with edges
            edges = target["mask_edges"]
            assert edges.dtype == torch.float32 and edges.shape[0] == len(boxes) and edges.shape[3] == 4
            assert (edges != 0).flatten(1).any(1).all()


def test_retinanet_sample_is_the_mlperf_openimages_layout_read_at_800x800(tmp_path):
    data = SSD.write_sample_data("retinanet-resnext50", tmp_path, samples=3, seed=0)
    root = Path(data)
    labels = json.loads((root / "train" / "labels" / "openimages-mlperf.json").read_text())
    assert len(labels["images"]) == 3 and [c["id"] for c in labels["categories"]] == list(range(264))
    assert len(json.loads((root / "validation" / "labels" / "openimages-mlperf.json").read_text())["images"]) == 1
    first = labels["images"][0]
    with Image.open(root / "train" / "data" / first["file_name"]) as image:
        assert image.format == "JPEG" and image.size == (first["width"], first["height"]) and max(image.size) == 1024
    assert len(Path(first["file_name"]).stem) == 16  # an OpenImages ImageID
    job = job_on(SSD, "retinanet-resnext50", data)
    assert job.division == "closed" and job.global_batch_size == 256  # its rows wrap round the 3 images
    batch = job.batch(0, slice(0, 2))
    assert len(batch["images"]) == 2 and max(batch["images"][0].shape[1:]) == 1024
    check_targets(batch, 264, masks=False)
    resized, _ = job.model.transform(batch["images"], batch["targets"])
    assert resized.tensors.shape == (2, 3, 800, 800)


def test_maskrcnn_sample_is_coco_2017_with_polygons_read_at_800_to_1333(tmp_path):
    data = MASKRCNN.write_sample_data("maskrcnn-r50", tmp_path, samples=3, seed=0)
    root = Path(data)
    labels = json.loads((root / "annotations" / "instances_train2017.json").read_text())
    assert len(labels["categories"]) == 80 and max(c["id"] for c in labels["categories"]) == 90  # COCO's
    assert all(isinstance(a["segmentation"], list) for a in labels["annotations"])  # polygons
    assert len(json.loads((root / "annotations" / "instances_val2017.json").read_text())["images"]) == 1
    first = labels["images"][0]
    assert first["file_name"] == f"{first['id']:012d}.jpg" and (root / "train2017" / first["file_name"]).is_file()
    assert len(list((root / "val2017").iterdir())) == 1
    job = job_on(MASKRCNN, "maskrcnn-r50", data)
    assert job.division == "closed" and job.global_batch_size == 64
    batch = job.batch(0, slice(0, 2))
    assert all(max(image.shape[1:]) <= 640 for image in batch["images"])
    check_targets(batch, 91, masks=True)
    resized, targets = job.model.transform(batch["images"], batch["targets"])
    for (height, width), target, before in zip(resized.image_sizes, targets, batch["targets"]):
        assert min(height, width) == 800 and max(height, width) <= 1333
        # the outlines are scaled as the boxes: each object's box is its polygon's extent
        edges = target["mask_edges"]
        points = edges[..., :2].flatten(1, 2)
        real = (edges[..., :2] != edges[..., 2:]).any(-1, keepdim=True).flatten(1, 2)  # padding edges are 0 long
        extent = torch.cat([points.where(real, torch.inf).amin(1), points.where(real, -torch.inf).amax(1)], 1)
        torch.testing.assert_close(extent, target["boxes"], atol=0.05, rtol=0)
        assert not torch.equal(edges, before["mask_edges"])


def test_a_tier_sample_is_its_own_mosaics(tmp_path):
    data = MASKRCNN.write_sample_data("maskrcnn-tiny", tmp_path, samples=4, seed=0)
    assert (Path(data) / "annotations" / "instances_train2017.json").is_file()
    batch = job_on(MASKRCNN, "maskrcnn-tiny", data).batch(0, slice(0, 4))
    assert [tuple(image.shape) for image in batch["images"]] == [(3, 64, 64)] * 4
    check_targets(batch, 11, masks=True)
