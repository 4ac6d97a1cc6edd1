"""The official formats on tiny files written here: webdataset shards of moments (.npy + .txt),
indexed and read on demand (raw-image shards refused with the command that converts them), the metadata parquet's license filter, the COCO captions TSV, FID statistics .npz;
bad files are one DataError line."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainclock.errors import DataError
from trainclock.workloads.stable_diffusion.data.formats import (licensed_keys, read_captions_tsv, read_fid_stats,
                                                                write_fid_stats)
from trainclock.workloads.stable_diffusion.data.sample import npy_bytes, write_shard
from trainclock.workloads.stable_diffusion.data.shard_index import LazyCaptions, LazyMoments, scan_shard, shard_index


def png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), 200, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_shards_are_indexed_once_and_read_on_demand(tmp_path, monkeypatch):
    moments = [np.full((8, 2, 2), i, dtype=np.float16) for i in range(5)]
    write_shard(tmp_path / "00000.tar", {f"{i:09d}": {"npy": npy_bytes(moments[i]), "txt": f" item {i} \n".encode()}
                                        for i in range(3)})
    write_shard(tmp_path / "00001.tar", {f"{i:09d}": {"txt": f"item {i}".encode(), "npy": npy_bytes(moments[i])}
                                        for i in range(3, 5)})
    index = shard_index(tmp_path, lambda: {"000000000", "000000002", "000000003", "000000004"})
    assert len(index) == 4 and index.shard.tolist() == [0, 0, 1, 1]
    latents, ids = LazyMoments(index), LazyCaptions(index, lambda texts: texts)
    assert latents[torch.tensor([3, 0, 1])][:, 0, 0, 0].tolist() == [4.0, 0.0, 2.0]
    assert latents[torch.tensor([2])].dtype == torch.float32 and ids[torch.tensor([1, 2])] == ["item 2", "item 3"]
    # the second call reads the cached index: the license filter is not consulted again
    assert len(shard_index(tmp_path, lambda: pytest.fail("the cached index was rebuilt"))) == 4


def test_bad_shards_are_one_line(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    write_shard(raw / "00000.tar", {"000000001": {"png": png_bytes(), "txt": b"a dog"}})
    with pytest.raises(DataError, match="no .npy moments: training needs VAE moments"):
        shard_index(raw, lambda: None)
    for name, files, error in [("nocap", {"npy": npy_bytes(np.zeros((8, 2, 2)))}, "no .txt caption"),
                               ("badnpy", {"npy": b"not npy", "txt": b"x"}, "bad .npy"),
                               ("flat", {"npy": npy_bytes(np.zeros(4)), "txt": b"x"}, "moments of shape")]:
        folder = tmp_path / name
        folder.mkdir()
        write_shard(folder / "00000.tar", {"000000001": files})
        with pytest.raises(DataError, match=error):
            LazyMoments(shard_index(folder, lambda: None))[torch.tensor([0])]
    with pytest.raises(DataError, match="no webdataset shards"):
        shard_index(tmp_path / "nocap" / "none", lambda: None)
    (tmp_path / "bad.tar").write_bytes(b"not a tar")
    with pytest.raises(DataError, match="cannot read webdataset shard"):
        scan_shard(tmp_path / "bad.tar", None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 4095), flip=st.integers(0, 4095), byte=st.integers(0, 255))
def test_a_damaged_shard_is_read_or_refused_never_a_crash(tmp_path, cut, flip, byte):
    """Untrusted input: a truncated or bit-flipped shard either indexes and reads or raises DataError."""
    folder = tmp_path / f"fuzz-{cut}-{flip}-{byte}"
    folder.mkdir()
    write_shard(folder / "00000.tar", {f"{i:09d}": {"npy": npy_bytes(np.zeros((8, 2, 2), np.float16)), "txt": b"x"}
                                       for i in range(2)})
    data = bytearray((folder / "00000.tar").read_bytes())
    data[flip % len(data)] = byte
    (folder / "00000.tar").write_bytes(bytes(data[:max(1, len(data) - cut)]))
    try:
        index = shard_index(folder, lambda: None)
        LazyMoments(index)[torch.arange(len(index))]
        LazyCaptions(index, lambda texts: texts)[torch.arange(len(index))]
    except DataError as e:
        assert "\n" not in str(e)


def test_metadata_parquet_drops_unknown_licenses(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"key": ["1", "2", "3"], "LICENSE": ["?", "cc-by", None]}), tmp_path / "m.parquet")
    assert licensed_keys(tmp_path / "m.parquet") == {"2", "3"}
    pq.write_table(pa.table({"key": ["1"]}), tmp_path / "no_license.parquet")
    with pytest.raises(DataError, match="key and LICENSE"):
        licensed_keys(tmp_path / "no_license.parquet")


def test_captions_tsv_and_fid_statistics(tmp_path):
    tsv = tmp_path / "val2014_30k.tsv"
    tsv.write_text("image_id\tid\tcaption\n9\t48\tA man riding a horse.\n25\t59\tTwo dogs.\n")
    assert read_captions_tsv(tsv) == [(9, 48, "A man riding a horse."), (25, 59, "Two dogs.")]
    (tmp_path / "bad.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(DataError, match="COCO captions TSV"):
        read_captions_tsv(tmp_path / "bad.tsv")
    write_fid_stats(tmp_path / "s.npz", np.zeros(3), np.eye(3), 10)
    stats = read_fid_stats(tmp_path / "s.npz")
    assert stats["sigma"].shape == (3, 3) and int(stats["count"]) == 10
    np.savez(tmp_path / "bad.npz", mu=np.zeros(3))
    with pytest.raises(DataError, match="lacks mu"):
        read_fid_stats(tmp_path / "bad.npz")
