"""write_sample_data: made-up LAION-400M moments in the reference's webdataset shards, a COCO
captions TSV and a CLIP tokenizer in the checkpoint's layout, which sd-laion400m's job reads on the
meta device without any weights (what benchmarks/host_pipeline.py times), giving batches of the
closed config's shapes."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion import WORKLOAD
from trainclock.workloads.stable_diffusion.data.sample import npy_bytes

META = torch.device("meta")


def test_full_size_sample_is_the_reference_layout_and_batches_as_the_closed_config(tmp_path):
    data = WORKLOAD.write_sample_data("sd-laion400m", tmp_path, 16, seed=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000.parquet", "00000.tar", "checkpoint",
                                                          "val2014_30k.tsv"]
    with tarfile.open(tmp_path / "00000.tar") as tar:
        names = tar.getnames()
        moments = np.load(io.BytesIO(tar.extractfile("000000000.npy").read()))
    assert names[:4] == ["000000000.npy", "000000000.txt", "000000001.npy", "000000001.txt"] and len(names) == 32
    assert moments.shape == (8, 64, 64) and moments.dtype == np.float16
    assert len(npy_bytes(moments)) == 65_664  # 64 KB of moments a sample, as the reference's 420 GB / 6.5M
    assert len((tmp_path / "val2014_30k.tsv").read_text().splitlines()) == 2  # the header and one caption
    vocab = json.loads((tmp_path / "checkpoint" / "tokenizer" / "vocab.json").read_text())
    assert len(vocab) == 49_408 and (vocab["<|startoftext|>"], vocab["<|endoftext|>"]) == (49_406, 49_407)

    settings = RunSettings(data=data, global_batch_size=8)
    spec = WORKLOAD.resolve("sd-laion400m", settings, Layout(), META)
    job = WORKLOAD.build_job(spec, single_process(), META, 3, settings)
    assert job.division == "closed" and job.log_keys["train_samples"] == 16 and job.eval_samples == 1
    batch = job.batch(0, slice(0, 4))
    assert batch["latents"].shape == batch["noise"].shape == (4, 4, 64, 64)
    assert batch["latents"].dtype == torch.float32 and 0.8 < float(batch["latents"].std()) < 1.2  # scaled by 0.18215
    ids = batch["ids"]
    assert ids.shape == (4, 77) and ids.dtype == torch.int64 and (ids[:, 0] == 49_406).all()
    assert 5 < float((ids < 49_407).sum(1).float().mean()) < 40  # LAION's alt-text: a dozen or so tokens
    assert batch["timesteps"].shape == (4,) and int(batch["timesteps"].max()) < 1000


def test_the_tiers_take_no_sample_data(tmp_path):
    with pytest.raises(UsageError, match="reads no --data"):
        WORKLOAD.write_sample_data("sd-tiny", tmp_path, 16, seed=0)
