"""write_sample_data: gpt3-175b's made-up data is C4's published json.gz shards with C4's document
lengths, holding enough text for the training windows asked for and MLPerf's validation set, which
the full config tokenizes into 2,048-token batches of its 50,257-token vocabulary."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace

import pytest
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.gpt3 import WORKLOAD, spec as gpt3_spec
from trainclock.workloads.gpt3.data.sources import parse_source

META = torch.device("meta")


def job_on(member: str, data: str, seed: int = 3):
    settings = RunSettings(data=data)
    spec = WORKLOAD.resolve(member, settings, Layout(), META)
    return WORKLOAD.build_job(spec, single_process(), META, seed, settings)


def test_gpt3_175b_sample_data_is_c4_shards_with_enough_text(tmp_path):
    data = WORKLOAD.write_sample_data("gpt3-175b", tmp_path, samples=6, seed=1)
    assert data == f"c4:{tmp_path}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c4-train.00000-of-01024.json.gz",
                                                          "c4-validation.00000-of-00008.json.gz"]
    with gzip.open(tmp_path / "c4-train.00000-of-01024.json.gz", "rt") as f:
        assert set(json.loads(f.readline())) == {"text", "timestamp", "url"}
    words = {"train": [], "val": []}
    for piece in parse_source(data).pieces():
        words[piece.split].append(piece.text.count(" ") + 1)  # a word is one token or more
    assert sum(words["train"]) >= 6 * 2049
    assert sum(words["val"]) >= 5659 * 2048 + 1  # MLPerf's validation subset: 5,659 sequences
    mean = sum(words["val"]) / len(words["val"])
    assert 400 < mean < 540 and 22_000 < len(words["val"]) < 27_000  # C4's document lengths: 24,567 documents


def test_gpt3_175b_job_gives_2048_token_batches_of_its_vocabulary(tmp_path, monkeypatch):
    # a validation set of 4 sequences: MLPerf's 11.6M tokens take ~30 s to tokenize on 2 busy cores (the slow test)
    full = gpt3_spec.get_member("gpt3-175b")
    monkeypatch.setitem(gpt3_spec.MEMBERS, "gpt3-175b", replace(full, eval_sequences=4))
    job = job_on("gpt3-175b", WORKLOAD.write_sample_data("gpt3-175b", tmp_path, samples=6, seed=1))
    assert job.division == "closed" and job.eval_samples == 4 * 2048
    x, y = job.batch(0, slice(0, 4))
    assert x.shape == y.shape == (4, 2048) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # next-token targets
    assert 0 <= int(x.min()) and 40_000 < int(x.max()) < 50257  # the learned vocabulary is the full 50,257
    assert torch.equal(job.batch(0, slice(1, 3))[0], x[1:3])  # a rank's rows


@pytest.mark.slow
def test_gpt3_175b_job_accepts_the_sample_validation_set(tmp_path):
    job = job_on("gpt3-175b", WORKLOAD.write_sample_data("gpt3-175b", tmp_path, samples=2, seed=2))
    assert job.eval_samples == 5659 * 2048


def test_a_cpu_tier_reads_its_sample_text(tmp_path):
    job = job_on("gpt3-tiny", WORKLOAD.write_sample_data("gpt3-tiny", tmp_path, samples=40, seed=1))
    x, _ = job.batch(0, slice(0, 8))
    assert x.shape == (8, 128) and int(x.max()) < 1024
