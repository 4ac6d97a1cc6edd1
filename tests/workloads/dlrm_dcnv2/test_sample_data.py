"""write_sample_data: made-up Criteo 1TB multi-hot day files that the full config's job reads as it
would the real set (on the meta device: no 26B-parameter tables are made), batches of the official
shapes, and the same for a CPU tier."""

from __future__ import annotations

import numpy as np
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.dlrm_dcnv2 import WORKLOAD
from trainclock.workloads.dlrm_dcnv2.data.criteo import day_paths
from trainclock.workloads.dlrm_dcnv2.data.sample import EVAL_DAY_ROWS
from trainclock.workloads.dlrm_dcnv2.spec import CRITEO_MULTI_HOT, CRITEO_ROWS, get_member

META = torch.device("meta")
GBS = 32_768  # the rules' smallest reference batch: one global batch of samples stays quick to write


def job_on(member: str, data: str, gbs: int):
    settings = RunSettings(data=data, global_batch_size=gbs)
    spec = WORKLOAD.resolve(member, settings, Layout(), META)
    return WORKLOAD.build_job(spec, single_process(), META, 7, settings)


def test_full_size_sample_data_is_criteo_multi_hot_and_gives_official_batches(tmp_path):
    data = WORKLOAD.write_sample_data("dlrm-criteo1tb", tmp_path / "criteo", GBS, seed=3)
    folder = tmp_path / "criteo"
    assert data == str(folder)
    # days 0-22 train (every sample in day 0: a batch is one block of one day, as in the real days),
    # day 23 the eval day, each as the reference writes it
    rows = []
    for day in range(24):
        paths = day_paths(folder, day)
        dense, labels = np.load(paths["dense"]), np.load(paths["labels"])
        with np.load(paths["multi_hot"]) as npz:
            sparse = [npz[str(t)] for t in range(26)]
        assert dense.dtype == np.float32 and dense.shape == (len(dense), 13)
        assert labels.dtype == np.int32 and labels.shape == (len(dense), 1)
        assert [a.shape for a in sparse] == [(len(dense), m) for m in CRITEO_MULTI_HOT]
        assert all(a.dtype == np.int32 for a in sparse)
        rows.append(len(dense))
        if day == 0:  # ids over each table's real rows: the 40M-row tables' reach their top
            assert all(0 <= a.min() and a.max() < n for a, n in zip(sparse, CRITEO_ROWS))
            assert sparse[0].max() > CRITEO_ROWS[0] * 0.99 and set(np.unique(sparse[5])) == {0, 1, 2}
    assert rows == [GBS] + [0] * 22 + [EVAL_DAY_ROWS]
    assert sum(f.stat().st_size for f in folder.iterdir()) / GBS < 1_000  # 912 bytes a sample, and headers

    job = job_on("dlrm-criteo1tb", data, GBS)
    assert job.division == "closed" and job.log_keys["trainclock_train_samples_available"] == GBS
    assert job.log_keys["trainclock_eval_samples_read"] == 2  # one click, one not: AUC is defined
    batch = job.batch(0, slice(0, 1024))
    assert batch["dense"].shape == (1024, 13) and batch["dense"].dtype == torch.float32
    assert batch["sparse"].shape == (1024, sum(CRITEO_MULTI_HOT)) == (1024, 214)
    assert batch["sparse"].dtype == torch.int64
    limits = torch.repeat_interleave(torch.tensor(CRITEO_ROWS), torch.tensor(CRITEO_MULTI_HOT))
    assert bool((batch["sparse"] < limits).all())
    assert batch["labels"].shape == (1024,) and batch["labels"].dtype == torch.float32
    assert torch.equal(job.batch(0, slice(512, 1024))["sparse"], batch["sparse"][512:])  # a rank's own rows


def test_a_tier_reads_its_sample_data_as_criteo_format(tmp_path):
    spec = get_member("dlrm-tiny")
    data = WORKLOAD.write_sample_data("dlrm-tiny", tmp_path, spec.global_batch_size, seed=1)
    job = job_on("dlrm-tiny", data, spec.global_batch_size)
    batch = job.batch(0, slice(0, 64))
    assert batch["dense"].shape == (64, 13) and batch["sparse"].shape == (64, sum(spec.shape.multi_hot))
    assert job.log_keys["dataset"] == "criteo_format"
