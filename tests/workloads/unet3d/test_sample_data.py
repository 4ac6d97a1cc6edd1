"""write_sample_data: made-up KiTS19 in the reference's preprocessed .npy format that the full
config's job reads as it would the real set (on the meta device), at a real case's size, giving
128^3 patches of the official crop, with one evaluation case, the fewest the job accepts."""

from __future__ import annotations

import numpy as np
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.unet3d import WORKLOAD
from trainclock.workloads.unet3d.data.sample import write_sample
from trainclock.workloads.unet3d.spec import get_member

META = torch.device("meta")


def job_on(member: str, data: str):
    settings = RunSettings(data=data)
    spec = WORKLOAD.resolve(member, settings, Layout(), META)
    return WORKLOAD.build_job(spec, single_process(), META, 5, settings)


def pairs(folder) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    names = sorted(p.name[:-len("_x.npy")] for p in folder.glob("case_*_x.npy"))
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}_{s}.npy" for n in names for s in "xy")
    return {n: (np.load(folder / f"{n}_x.npy", mmap_mode="r"), np.load(folder / f"{n}_y.npy", mmap_mode="r"))
            for n in names}


def test_full_size_cases_are_preprocessed_kits19_of_a_real_case_size(tmp_path):
    data = WORKLOAD.write_sample_data("unet3d-kits19", tmp_path, 1, seed=2)
    cases = pairs(tmp_path)
    assert data == str(tmp_path) and sorted(cases) == ["case_00000", "case_00001"]  # 00000 is an evaluation case
    for image, label in cases.values():
        assert image.dtype == np.float32 and label.dtype == np.uint8 and image.shape == label.shape
        depth, height, width = image.shape[1:]
        assert image.shape[0] == 1 and 130 <= depth <= 270 and 260 <= height == width <= 400
        assert 50e6 < image.nbytes + label.nbytes < 200e6  # ~108 MB a case on average
        assert set(np.unique(label[0, ::4, ::4, ::4])) == {0, 1, 2}  # kidney and tumour present
        # clipped to [-79, 304] HU and normalised with mean 101, std 76.9, as the reference
        assert -2.35 < image.min() and image.max() < 2.65


def test_full_config_job_reads_its_sample_data_and_crops_official_patches(tmp_path):
    spec = get_member("unet3d-kits19")
    data = write_sample(spec, tmp_path, 3, seed=4, scale=0.5)  # an eighth of a real case's bytes
    cases = pairs(tmp_path)
    assert sorted(cases) == ["case_00000", "case_00001", "case_00002", "case_00004"]
    assert all(min(image.shape[1:]) >= 128 for image, _ in cases.values())  # small sides padded to the patch
    job = job_on("unet3d-kits19", data)
    assert job.division == "closed" and job.global_batch_size == 56
    assert (job.log_keys["train_samples"], job.eval_samples) == (3, 1)
    batch = job.batch(0, slice(0, 3))
    assert batch["image"].shape == batch["label"].shape == (3, 1, 128, 128, 128)
    assert batch["image"].dtype == torch.float32 and batch["label"].dtype == torch.uint8
    assert set(torch.unique(batch["label"]).tolist()) <= {0, 1, 2}
    assert torch.equal(job.batch(0, slice(1, 3))["image"], batch["image"][1:])  # a rank's own rows


def test_a_tier_reads_its_sample_data(tmp_path):
    spec = get_member("unet3d-tiny")
    data = WORKLOAD.write_sample_data("unet3d-tiny", tmp_path, spec.global_batch_size, seed=1)
    assert "case_00004" in pairs(tmp_path)  # the tier's first evaluation case
    batch = job_on("unet3d-tiny", data).batch(0, slice(0, spec.global_batch_size))
    assert batch["image"].shape == (spec.global_batch_size, 1, 32, 32, 32)
