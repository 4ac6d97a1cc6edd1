"""write_sample_data: bert-large's made-up data is NVIDIA's packed HDF5 shards with the real set's
spread of sequence lengths, read back by the full config's own loader into the batches the real
data gives (512 tokens, 76 predictions), on the meta device without a start checkpoint."""

from __future__ import annotations

import h5py
import numpy as np
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.bert import WORKLOAD
from trainclock.workloads.bert.data import hdf5
from trainclock.workloads.bert.data.official import load_folder
from trainclock.workloads.bert.data.sample import CLS, MASK, SEP, instances, write_sample
from trainclock.workloads.bert.spec import get_member

META = torch.device("meta")


def job_on_member(member: str, data: str, seed: int = 3, **extra):
    settings = RunSettings(data=data, extra=extra)
    spec = WORKLOAD.resolve(member, settings, Layout(), META)
    return WORKLOAD.build_job(spec, single_process(), META, seed, settings)


def test_bert_large_sample_data_gives_the_official_batches(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINCLOCK_BERT_INIT_CHECKPOINT", raising=False)  # a meta build loads no weights
    data = WORKLOAD.write_sample_data("bert-large", tmp_path, samples=40, seed=1)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.hdf5")) == [
        "eval_varlength/part_00000.hdf5", "packed_data/part_00000.hdf5"]
    with h5py.File(tmp_path / "packed_data" / "part_00000.hdf5") as f:
        assert set(f) == set(hdf5.PACKED_KEYS)
        assert f["input_ids"].shape[1] == 512 and f["masked_lm_positions"].shape[1] == 76 + 3
        assert f["next_sentence_weights"][:].sum() == 40  # 40 sequences, several to a row
        assert f["input_ids"].shape[0] < 40
    job = job_on_member("bert-large", data, pack_sequences=False)  # one sequence a row, as read
    assert job.division == "closed" and job.eval_samples == 1
    batch = job.batch(0, slice(0, 8))
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in batch.items()}
    assert shapes == {"input_ids": ((8, 512), torch.int64), "segment_ids": ((8, 512), torch.int64),
                      "input_mask": ((8, 512), torch.int64), "masked_lm_positions": ((8, 76), torch.int64),
                      "masked_lm_ids": ((8, 76), torch.int64), "masked_lm_weights": ((8, 76), torch.float32),
                      "next_sentence_labels": ((8,), torch.int64)}
    assert (batch["input_ids"][:, 0] == CLS).all() and int(batch["input_ids"].max()) < 30522
    assert torch.equal(job.batch(0, slice(2, 5))["input_ids"], batch["input_ids"][2:5])  # a rank's rows
    packed = job_on_member("bert-large", data).batch(0, slice(0, 8))  # the default: the same 8 sequences, packed
    assert sum(packed.counts) == 8 and packed.inputs()["input_ids"].shape[1] == 512
    assert len(packed.inputs()["input_ids"]) < 8
    assert torch.equal(torch.sort(packed.inputs()["input_ids"][packed.inputs()["input_ids"] > 0]).values,
                       torch.sort(batch["input_ids"][batch["input_ids"] > 0]).values)  # the same tokens


def test_unpacked_shards_hold_the_same_kind_of_instances(tmp_path):
    data = write_sample(get_member("bert-large"), tmp_path, samples=10, seed=2, packed=False)
    assert (tmp_path / "hdf5_varlength" / "part_00000.hdf5").is_file()
    train, evaluation = load_folder(data, 512, 76)
    assert len(train["input_ids"]) == 10 and len(evaluation["input_ids"]) == 1


def test_instances_have_the_real_sets_lengths_and_masking():
    arrays = instances(4000, 512, 76, 30522, np.random.default_rng(0))
    length = arrays["input_mask"].sum(axis=1)
    assert 200 < length.mean() < 280 and (length == 512).mean() > 0.08  # >50% padding, some full sequences
    predicted = arrays["masked_lm_weights"].sum(axis=1)
    assert (predicted == np.minimum(76, np.maximum(1, np.rint(0.15 * length)))).all()
    rows = np.arange(len(length))[:, None]
    ids, positions = arrays["input_ids"], arrays["masked_lm_positions"]
    used = arrays["masked_lm_weights"] > 0
    assert ((positions[:, 1:] > positions[:, :-1]) | ~used[:, 1:]).all()  # sorted, unused slots last
    at = ids[rows, positions][used]
    assert (at != CLS).all() and (at != SEP).all() and 0.75 < (at == MASK).mean() < 0.85
    assert ((ids == SEP).sum(axis=1) == 2).all()
    segments = arrays["segment_ids"]
    assert (segments[:, 0] == 0).all() and (segments.sum(axis=1) >= 1).all()


def test_packing_and_unpacking_give_back_the_instances(tmp_path):
    arrays = instances(30, 512, 76, 30522, np.random.default_rng(5))
    packed = hdf5.pack(arrays, 76)
    assert packed["next_sentence_weights"].sum() == 30 and len(packed["input_ids"]) < 30
    hdf5.write_packed(tmp_path / "train.hdf5", packed)
    back = hdf5.read_instances([tmp_path / "train.hdf5"], 76)
    for key, value in arrays.items():
        assert np.array_equal(back[key], value.astype(back[key].dtype)), key


def test_a_cpu_tier_reads_its_sample_text(tmp_path):
    job = job_on_member("bert-tiny", WORKLOAD.write_sample_data("bert-tiny", tmp_path, samples=32, seed=1))
    batch = job.batch(0, slice(0, 8))
    assert batch["input_ids"].shape == (8, 128) and batch["masked_lm_positions"].shape == (8, 20)
