"""The official formats on tiny files written here: webdataset shards of moments (.npy + .txt) and
of raw images, the metadata parquet's license filter, the COCO captions TSV, FID statistics .npz;
bad files are one DataError line."""

from __future__ import annotations

import io
import tarfile

import numpy as np
import pytest

from trainclock.errors import DataError
from trainclock.workloads.stable_diffusion.data.formats import (decode_sample, licensed_keys, read_captions_tsv,
                                                                read_fid_stats, read_shard, write_fid_stats)


def write_shard(path, samples: dict[str, dict[str, bytes]]):
    with tarfile.open(path, "w") as tar:
        for key, files in samples.items():
            for ext, data in files.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), 200, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_moments_and_raw_image_shards(tmp_path):
    moments = np.arange(8 * 2 * 2, dtype=np.float16).reshape(8, 2, 2)
    shard = write_shard(tmp_path / "00000.tar", {"000000001": {"npy": npy_bytes(moments), "txt": b"a cat"},
                                                  "000000002": {"png": png_bytes(), "txt": b" a dog \n"}})
    samples = [decode_sample(k, s, shard) for k, s in read_shard(shard)]
    assert np.array_equal(samples[0][0], moments) and samples[0][1] == "a cat"
    assert samples[1][0].shape == (4, 4, 3) and samples[1][1] == "a dog"
    with pytest.raises(DataError, match="no .txt caption"):
        decode_sample("x", {"npy": npy_bytes(moments)}, shard)
    (tmp_path / "bad.tar").write_bytes(b"not a tar")
    with pytest.raises(DataError, match="cannot read webdataset shard"):
        list(read_shard(tmp_path / "bad.tar"))


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
