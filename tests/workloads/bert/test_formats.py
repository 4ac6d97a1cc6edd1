"""The official data formats, on tiny files written here: the reference's TFRecords (framing and
tf.train.Example encoded by hand, as TensorFlow writes them) and NVIDIA's HDF5 shards, read back
through bert-large's folder loader into the same arrays."""

from __future__ import annotations

import struct

import h5py
import numpy as np
import pytest

from trainclock.errors import DataError
from trainclock.workloads.bert.data import hdf5
from trainclock.workloads.bert.data.instances import make_instances
from trainclock.workloads.bert.data.official import load_folder
from trainclock.workloads.bert.data.tfrecord import crc32c, masked_crc

SEQ, PRED = 512, 76


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def example(row: dict) -> bytes:
    entries = b""
    for key, values in row.items():
        if key == "masked_lm_weights":
            feature = field(2, field(1, struct.pack(f"<{len(values)}f", *values)))
        else:
            feature = field(3, field(1, b"".join(varint(int(v)) for v in values)))
        entries += field(1, field(1, key.encode()) + field(2, feature))
    return field(1, entries)


def write_tfrecord(path, payloads) -> None:
    with open(path, "wb") as f:
        for p in payloads:
            length = struct.pack("<Q", len(p))
            f.write(length + struct.pack("<I", masked_crc(length)) + p + struct.pack("<I", masked_crc(p)))


def instances(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    documents = [[list(rng.integers(5, 30000, size=rng.integers(8, 40))) for _ in range(40)] for _ in range(4)]
    return make_instances(documents, n, SEQ, PRED, 30522, seed=seed)


def rows(arrays: dict[str, np.ndarray]) -> list[dict]:
    return [{k: np.atleast_1d(v[i]).tolist() for k, v in arrays.items()} for i in range(len(arrays["input_ids"]))]


def test_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value


def test_tfrecords_read_back_the_instances(tmp_path):
    train, evaluation = instances(5, 1), instances(3, 2)
    write_tfrecord(tmp_path / "part-00000-of-00002", [example(r) for r in rows(train)[:3]])
    write_tfrecord(tmp_path / "part-00001-of-00002", [example(r) for r in rows(train)[3:]])
    (tmp_path / "eval_10k").mkdir()
    write_tfrecord(tmp_path / "eval_10k" / "part-00000", [example(r) for r in rows(evaluation)])
    got_train, got_eval = load_folder(str(tmp_path), SEQ, PRED)
    for want, got in ((train, got_train), (evaluation, got_eval)):
        for key, value in want.items():
            assert np.array_equal(got[key], value.astype(got[key].dtype)), key


def test_a_corrupt_tfrecord_is_one_line(tmp_path):
    write_tfrecord(tmp_path / "part-0", [example(r) for r in rows(instances(2, 1))])
    data = bytearray((tmp_path / "part-0").read_bytes())
    data[40] ^= 0xFF
    (tmp_path / "part-0").write_bytes(bytes(data))
    with pytest.raises(DataError, match="part-0: corrupt TFRecord payload"):
        load_folder(str(tmp_path), SEQ, PRED)


def test_nvidia_hdf5_shards_read_back_the_instances(tmp_path):
    train, evaluation = instances(4, 3), instances(2, 4)
    for name, arrays in (("train_shard_0.hdf5", train), ("eval_shard.hdf5", evaluation)):
        hdf5.write_instances(tmp_path / name, arrays)  # NVIDIA's shards have no weights: unused slots have position 0
        with h5py.File(tmp_path / name) as f:
            assert "masked_lm_weights" not in f
    got_train, got_eval = load_folder(str(tmp_path), SEQ, PRED)
    for want, got in ((train, got_train), (evaluation, got_eval)):
        for key, value in want.items():
            assert np.array_equal(got[key], value.astype(got[key].dtype)), key


def test_sequences_of_another_length_are_refused(tmp_path):
    train = instances(2, 1)
    write_tfrecord(tmp_path / "part-0", [example(r) for r in rows(train)])
    write_tfrecord(tmp_path / "eval-0", [example(r) for r in rows(train)])
    with pytest.raises(DataError, match="bert-large needs 128 and 76"):
        load_folder(str(tmp_path), 128, PRED)


def short_instances(n: int, seed: int) -> dict[str, np.ndarray]:
    """Instances of at most 160 tokens, so that three fit one packed row."""
    rng = np.random.default_rng(seed)
    documents = [[list(rng.integers(5, 30000, size=rng.integers(8, 20))) for _ in range(10)] for _ in range(6)]
    arrays = make_instances(documents, n, 160, 24, 30522, seed=seed)
    for key in ("input_ids", "input_mask", "segment_ids"):
        arrays[key] = np.pad(arrays[key], ((0, 0), (0, SEQ - 160)))
    for key in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        arrays[key] = np.pad(arrays[key], ((0, 0), (0, PRED - 24)))
    return arrays


def test_packed_nvidia_hdf5_shards_unpack_into_the_same_instances(tmp_path):
    train, evaluation = short_instances(7, 5), short_instances(3, 6)
    for name, arrays in (("train_packed.hdf5", train), ("eval_packed.hdf5", evaluation)):
        packed = hdf5.pack(arrays, PRED, per_pack=3)
        assert len(packed["input_ids"]) == -(-len(arrays["input_ids"]) // 3)  # three short instances a row
        hdf5.write_packed(tmp_path / name, packed)
    got_train, got_eval = load_folder(str(tmp_path), SEQ, PRED)
    for want, got in ((train, got_train), (evaluation, got_eval)):
        assert len(got["input_ids"]) == len(want["input_ids"])
        for key, value in want.items():
            assert np.array_equal(got[key], value.astype(got[key].dtype)), key


def test_a_damaged_packed_shard_is_one_line(tmp_path):
    packed = hdf5.pack(short_instances(3, 5), PRED, per_pack=3)
    packed["next_sentence_positions"][0, 1] += 1  # sequence 2 no longer starts where its mask does
    hdf5.write_packed(tmp_path / "train_packed.hdf5", packed)
    hdf5.write_packed(tmp_path / "eval" / "eval_packed.hdf5", hdf5.pack(short_instances(3, 6), PRED, per_pack=3))
    with pytest.raises(DataError, match="packed row 0 sequence 2 is not one span"):
        load_folder(str(tmp_path), SEQ, PRED)


def test_the_tfrecord_writer_encodes_as_the_reference_does():
    arrays = instances(3, 7)
    from trainclock.workloads.bert.data.tfrecord import encode_example

    for row in rows(arrays):
        ordered = dict(sorted(row.items()))  # TensorFlow writes the feature map sorted by key
        assert encode_example({k: np.asarray(v, np.float32 if k == "masked_lm_weights" else np.int64)
                               for k, v in row.items()}) == example(ordered)


@pytest.mark.parametrize("data_format", ["tfrecord", "hdf5"])
def test_own_text_exports_to_the_official_formats_and_reads_back(tmp_path, data_format):
    from trainclock.workloads.bert.data.export import main

    text = tmp_path / "text"
    text.mkdir()
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    lines = [" ".join(rng.choice(words, size=12)) + "." for _ in range(30 * 200)]
    (text / "book.txt").write_text("\n".join(lines))
    code = main([str(text), str(tmp_path / "out"), "--format", data_format, "--shards", "2",
                 "--train-instances", "6", "--eval-instances", "3", "--seq-len", "64", "--max-predictions", "10",
                 "--vocab-size", "400"])
    assert code == 0
    assert (tmp_path / "out" / "vocab.txt").read_text().splitlines()[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    train, evaluation = load_folder(str(tmp_path / "out"), 64, 10)
    assert len(train["input_ids"]) == 6 and len(evaluation["input_ids"]) == 3
    assert (train["input_ids"][:, 0] == 2).all()  # every instance starts with [CLS]
    masked = train["masked_lm_weights"].sum(axis=1)
    assert ((masked >= 1) & (masked <= 10)).all()


def test_export_of_missing_text_is_one_line(tmp_path, capsys):
    from trainclock.workloads.bert.data.export import main

    assert main([str(tmp_path / "nothing"), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("export: error:") and err.count("\n") == 1 and "Traceback" not in err
