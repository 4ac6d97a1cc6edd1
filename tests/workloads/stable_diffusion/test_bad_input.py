"""Bad Stable Diffusion input is one DataError or UsageError line at load time, never a traceback or a
silent wrong run: a parquet that licenses no sample, --data given to a tier, damaged captions TSVs,
FID statistics, checkpoint folders, TorchScript evaluators, shards and shard-index caches."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.damage import DAMAGE, damage
from tests.workloads.helpers import error_line
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.errors import DataError, UsageError
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion import WORKLOAD
from trainclock.workloads.stable_diffusion.data.formats import read_captions_tsv, read_fid_stats, write_fid_stats
from trainclock.workloads.stable_diffusion.data.sample import npy_bytes, write_laion, write_shard
from trainclock.workloads.stable_diffusion.data.shard_index import LazyCaptions, LazyMoments, _cache_path, shard_index
from trainclock.workloads.stable_diffusion.official import _licensed, _pretrained, _torchscript, build_official

META = torch.device("meta")
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def laion_sample(tmp_path_factory) -> Path:
    """sd-laion400m's sample data (4 samples of 4 x 8 x 8 latents), written once: copied per test."""
    return write_laion(tmp_path_factory.mktemp("laion") / "data", 4, 0, 4, 8)


@pytest.fixture
def laion(laion_sample, tmp_path) -> Path:
    return Path(shutil.copytree(laion_sample, tmp_path / "data"))


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text and text
    return text


# 1. a parquet that licenses no sample keeps none


def test_a_parquet_licensing_no_sample_is_refused_not_read_as_no_parquet(laion):
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = [f"00000{i:04d}" for i in range(4)]
    pq.write_table(pa.table({"key": keys, "LICENSE": ["?"] * 4}), laion / "00000.parquet")
    with pytest.raises(DataError, match="the parquet licenses none of the samples") as e:
        _licensed(laion)
    assert "00000.parquet" in one_line(e) or str(laion) in one_line(e)
    settings_ = RunSettings(data=str(laion), global_batch_size=2)
    spec = WORKLOAD.resolve("sd-laion400m", settings_, Layout(), META)
    with pytest.raises(DataError, match="licenses none of the samples"):
        WORKLOAD.build_job(spec, single_process(), META, 3, settings_)
    # without any parquet every sample is used; with one licensing some, those
    (laion / "00000.parquet").unlink()
    assert _licensed(laion) is None
    pq.write_table(pa.table({"key": keys, "LICENSE": ["?", "cc-by", "?", "cc-by"]}), laion / "00000.parquet")
    assert _licensed(laion) == {keys[1], keys[3]}


# 2. the tiers make their own data


def test_the_tiers_refuse_data(cli, tmp_path):
    for member in ("sd-tiny", "sd-mini"):
        line = error_line(cli("run", member, "--data", "/nonexistent/folder", "--out", tmp_path, "--no-progress"))
        assert "drop --data" in line and member in line
        line = error_line(cli("data", "prepare", member, "--data", "/nonexistent"))
        assert "drop --data" in line and member in line
    with pytest.raises(UsageError, match="drop --data"):
        WORKLOAD.resolve("sd-tiny", RunSettings(data="/nonexistent/folder"), Layout(), CPU)
    with pytest.raises(UsageError, match="drop --data"):
        WORKLOAD.prepare_data("sd-mini", "/nonexistent")


# 3. readers


def test_bad_captions_tsv_is_one_line(tmp_path):
    tsv = tmp_path / "val2014_30k.tsv"
    tsv.write_bytes(b"image_id\tid\tcaption\n1\t2\tcaf\xe9 au lait\n")
    with pytest.raises(DataError, match="not UTF-8") as e:
        read_captions_tsv(tsv)
    assert str(tsv) in one_line(e)
    tsv.write_text("image_id\tid\tcaption\n1\t2\t" + "x" * 200_000 + "\n")
    with pytest.raises(DataError, match="not a readable TSV") as e:
        read_captions_tsv(tsv)
    one_line(e)
    for text in ("", "image_id\tid\tcaption\n"):
        tsv.write_text(text)
        with pytest.raises(DataError, match="no captions"):
            read_captions_tsv(tsv)
    tsv.write_text("image_id\tid\tcaption\n1\t2\n")
    with pytest.raises(DataError, match="line 2 has no caption"):
        read_captions_tsv(tsv)


def test_bad_fid_statistics_are_one_line(tmp_path):
    good = tmp_path / "good.npz"
    write_fid_stats(good, np.zeros(3), np.eye(3), 10)
    data = good.read_bytes()
    cut = tmp_path / "cut.npz"
    for size in (len(data) // 2, len(data) - 30, 10):
        cut.write_bytes(data[:size])
        with pytest.raises(DataError, match="FID statistics") as e:
            read_fid_stats(cut)
        assert str(cut) in one_line(e)
    bad = tmp_path / "bad.npz"
    for arrays in ({"mu": np.array(["a", "b"]), "sigma": np.eye(2)},
                   {"mu": np.float64(1.0), "sigma": np.eye(1)},
                   {"mu": np.zeros(2), "sigma": np.array([["a", "b"], ["c", "d"]])},
                   {"mu": np.zeros(2), "sigma": np.eye(2), "count": np.array("many")},
                   {"mu": np.zeros(2), "sigma": np.eye(2), "count": np.zeros(3)},
                   {"mu": np.full(2, np.nan), "sigma": np.eye(2)}):
        np.savez(bad, **arrays)
        with pytest.raises(DataError) as e:
            read_fid_stats(bad)
        assert str(bad) in one_line(e)
    np.savez(bad, mu=np.array([None, 1], dtype=object), sigma=np.eye(2))
    with pytest.raises(DataError):
        read_fid_stats(bad)


def test_bad_checkpoint_and_evaluator_files_are_one_line(tmp_path):
    from transformers import CLIPTextModel

    empty = tmp_path / "text_encoder"
    empty.mkdir()
    with pytest.raises(DataError, match="text_encoder") as e:
        _pretrained(CLIPTextModel, empty, "the SD2 text encoder")
    one_line(e)
    (empty / "config.json").write_text("{not json")
    with pytest.raises(DataError, match="cannot load the SD2 text encoder") as e:
        _pretrained(CLIPTextModel, empty, "the SD2 text encoder")
    one_line(e)
    garbage = tmp_path / "clip.pt"
    garbage.write_bytes(b"\x00garbage, not TorchScript" * 40)
    with pytest.raises(DataError, match="clip.pt") as e:
        _torchscript(garbage, "the CLIP scorer")
    one_line(e)


def test_build_official_refuses_an_empty_text_encoder_and_a_garbage_clip(laion):
    checkpoint, evaluators = laion / "checkpoint", laion / "evaluators"
    (checkpoint / "text_encoder").mkdir()
    (checkpoint / "vae").mkdir()
    evaluators.mkdir()
    write_fid_stats(evaluators / "val2014_30k_stats.npz", np.zeros(3), np.eye(3), 10)
    settings_ = RunSettings(data=str(laion), global_batch_size=2)
    spec = WORKLOAD.resolve("sd-laion400m", settings_, Layout(), CPU)
    with pytest.raises(DataError, match="text_encoder is empty") as e:
        build_official(spec, settings_)
    one_line(e)
    (evaluators / "val2014_30k_stats.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DataError, match="FID statistics"):
        build_official(spec, settings_)
    # a bad tokenizer file is one line too
    (checkpoint / "tokenizer" / "vocab.json").write_bytes(b"\xff\xfe garbage")
    with pytest.raises(DataError, match="CLIP tokenizer"):
        build_official(spec, settings_)


def test_string_moments_in_a_shard_are_one_line(tmp_path):
    write_shard(tmp_path / "00000.tar", {"000000001": {"npy": npy_bytes(np.full((8, 2, 2), "ab")), "txt": b"x"}})
    with pytest.raises(DataError, match="moments of dtype") as e:
        LazyMoments(shard_index(tmp_path, lambda: None))[torch.tensor([0])]
    assert "00000.tar" in one_line(e)


def test_a_damaged_shard_index_cache_is_rebuilt(tmp_path):
    moments = [np.full((8, 2, 2), i, dtype=np.float16) for i in range(3)]
    write_shard(tmp_path / "00000.tar", {f"{i:09d}": {"npy": npy_bytes(moments[i]), "txt": b"x"} for i in range(3)})
    assert len(shard_index(tmp_path, lambda: None)) == 3
    cache = _cache_path(sorted(tmp_path.glob("*.tar")), [])
    good = cache.read_bytes()
    for damaged in (good[:len(good) // 2], b"PK\x03\x04" + b"\x00" * 50, b""):
        cache.write_bytes(damaged)
        index = shard_index(tmp_path, lambda: None)
        assert len(index) == 3 and LazyMoments(index)[torch.tensor([2])][0, 0, 0, 0] == 2.0
        assert cache.read_bytes() == good  # the damaged copy was replaced, not kept
    np.savez(cache, shard=np.array([0, 7, 0], np.int32), npy=np.zeros((3, 2), np.int64), txt=np.zeros((3, 2), np.int64))
    assert shard_index(tmp_path, lambda: None).shard.tolist() == [0, 0, 0]


# fuzz: every reader either loads a damaged file or raises DataError

_examples = itertools.count()


@settings(derandomize=True, max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["tsv", "fid", "shard", "cache"]), how=DAMAGE)
def test_damaged_files_load_or_raise_data_error(tmp_path, which, how):
    folder = tmp_path / f"example-{next(_examples)}"
    folder.mkdir()
    try:
        if which == "tsv":
            path = folder / "val2014_30k.tsv"
            path.write_bytes(damage(b"image_id\tid\tcaption\n9\t48\tA man riding a horse.\n25\t59\tTwo dogs.\n", how))
            read_captions_tsv(path)
        elif which == "fid":
            path = folder / "stats.npz"
            write_fid_stats(path, np.arange(3.0), np.eye(3), 10)
            path.write_bytes(damage(path.read_bytes(), how))
            stats = read_fid_stats(path)
            assert stats["sigma"].shape == (len(stats["mu"]),) * 2
        else:
            write_shard(folder / "00000.tar", {f"{i:09d}": {"npy": npy_bytes(np.full((8, 2, 2), i, np.float16)),
                                                            "txt": b"x"} for i in range(2)})
            if which == "shard":
                path = folder / "00000.tar"
                path.write_bytes(damage(path.read_bytes(), how) or b"\0")
            else:
                shard_index(folder, lambda: None)
                path = _cache_path(sorted(folder.glob("*.tar")), [])
                path.write_bytes(damage(path.read_bytes(), how))
            index = shard_index(folder, lambda: None)
            LazyMoments(index)[torch.arange(len(index))]
            LazyCaptions(index, lambda texts: texts)[torch.arange(len(index))]
            if which == "cache":  # the shard is sound: a damaged cache is rebuilt, never an error
                assert len(index) == 2
    except DataError as e:
        assert which != "cache", e
        assert "\n" not in str(e)
