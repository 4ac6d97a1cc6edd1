"""write_sample_data: made-up ImageNet in the official folder layout, at ImageNet's sizes and JPEG
bytes, that resnet-50's job reads as it would read ImageNet (224x224 uint8 crops, int64 labels);
and a CPU tier's own export layout."""

from __future__ import annotations

import re
from pathlib import Path

import torch
from PIL import Image

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.resnet import WORKLOAD

META = torch.device("meta")


def job_on(member: str, data: str, **extra):
    settings = RunSettings(data=data, extra={"loader_workers": 0, **extra})  # decode in this process
    spec = WORKLOAD.resolve(member, settings, Layout(), META)
    return spec, WORKLOAD.build_job(spec, single_process(), META, 0, settings)


def test_full_size_sample_is_imagenet_in_the_folder_layout(tmp_path):
    data = WORKLOAD.write_sample_data("resnet-50", tmp_path, samples=24, seed=0)
    root = Path(data)
    train = sorted((root / "train").glob("*/*"))
    assert len(train) == 24 and len(list((root / "val").glob("*/*"))) == 1  # the smallest eval set: one image
    for path in train:
        assert re.fullmatch(r"n\d{8}", path.parent.name) and path.name.startswith(path.parent.name + "_")
        assert path.suffix == ".JPEG"
    assert re.fullmatch(r"ILSVRC2012_val_\d{8}\.JPEG", next((root / "val").glob("*/*")).name)
    with Image.open(train[0]) as image:
        assert image.format == "JPEG" and image.mode == "RGB" and max(image.size) >= 375
    mean_bytes = sum(p.stat().st_size for p in train) / len(train)
    assert 60_000 < mean_bytes < 200_000  # ImageNet's JPEGs average about 110 KB


def test_full_size_job_reads_it_as_imagenet(tmp_path):
    data = WORKLOAD.write_sample_data("resnet-50", tmp_path, samples=16, seed=1)
    spec, job = job_on("resnet-50", data)
    assert job.division == "closed" and job.log_keys["dataset"] == "imagenet"
    assert job.global_batch_size == 3264  # the reference batch; its rows wrap round the 16 images
    batch = job.batch(0, slice(0, 4))
    assert batch["image"].shape == (4, 3, 224, 224) and batch["image"].dtype == torch.uint8
    assert batch["label"].shape == (4,) and batch["label"].dtype == torch.int64
    assert 0 <= batch["label"].min() and batch["label"].max() < 1000 and spec.shape.num_classes == 1000


def test_a_tier_sample_is_its_own_export_layout(tmp_path):
    data = WORKLOAD.write_sample_data("resnet-tiny", tmp_path, samples=20, seed=0)
    assert sorted(p.name for p in (Path(data) / "train").iterdir())[:2] == ["ankle-boot", "bag"]
    _, job = job_on("resnet-tiny", data)
    batch = job.batch(0, slice(0, 8))
    assert batch["image"].shape == (8, 3, 24, 24) and batch["image"].dtype == torch.uint8
    assert batch["label"].max() < 10
