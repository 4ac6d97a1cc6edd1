"""Bad BERT input is one DataError line at load time, never a traceback, a MemoryError or a silent
wrong run: text whose WordPiece vocabulary would outgrow the model (and the cache such text left),
truncated or mislabelled npz files, arrays of the wrong shape, type or row count, HDF5 strings and
groups, malformed TFRecord features and lengths."""

from __future__ import annotations

import itertools
import random
import struct
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.damage import DAMAGE, damage
from trainclock.errors import DataError
from trainclock.workloads.bert.data import hdf5, prepare as prepare_module, tfrecord
from trainclock.workloads.bert.data.official import load_folder
from trainclock.workloads.bert.data.prepare import Layout, load, prepare, prepared_folder
from trainclock.workloads.bert.data.sample import instances
from trainclock.workloads.bert.data.text import parse_source
from trainclock.workloads.bert.spec import get_member

SEQ, PRED, VOCAB = 16, 4, 1100


def small(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    return instances(n, SEQ, PRED, VOCAB, np.random.default_rng(seed))


def write_npz(folder: Path, train: dict, evaluation: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "train.npz", **train)
    np.savez(folder / "eval.npz", **(evaluation if evaluation is not None else small(2, 1)))
    return folder


def frame(payload: bytes) -> bytes:
    length = struct.pack("<Q", len(payload))
    return (length + struct.pack("<I", tfrecord.masked_crc(length)) + payload
            + struct.pack("<I", tfrecord.masked_crc(payload)))


def refused(folder: Path, match: str | None = None, vocab: int | None = None) -> str:
    with pytest.raises(DataError, match=match) as e:
        load_folder(str(folder), SEQ, PRED, vocab)
    text = str(e.value)
    assert text and "\n" not in text
    return text


# 4. a vocabulary larger than the model's embeddings


def cjk_text(folder: Path) -> Path:
    """4,000 lines of 3,000 distinct CJK characters: its alphabet alone outgrows bert-tiny's 2,048."""
    rng = random.Random(0)
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    folder.mkdir()
    (folder / "cjk.txt").write_text("".join("".join(rng.choice(chars) for _ in range(24)) + "\n"
                                            for _ in range(4000)), encoding="utf-8")
    return folder


def test_cjk_text_gets_a_vocabulary_the_model_can_embed(tmp_path):
    from trainclock.workloads.bert.workload import data_layout, start_checkpoint

    spec = replace(get_member("bert-tiny"), train_instances=64, eval_samples=16, phase1_steps=1)
    prepared = prepare(parse_source(str(cjk_text(tmp_path / "cjk"))), data_layout(spec))
    assert prepared.vocab_size <= spec.shape.vocab_size == 2048
    for arrays in (prepared.train, prepared.eval):
        assert arrays["input_ids"].max() < 2048 and arrays["masked_lm_ids"].max() < 2048
    from trainclock.workloads.bert.data.batches import as_tensors

    assert start_checkpoint(spec, prepared, as_tensors(prepared.train)).is_file()  # phase 1 trains: no IndexError


def test_a_cache_with_a_vocabulary_too_large_is_rebuilt_not_kept(tmp_path, monkeypatch):
    source = parse_source(str(cjk_text(tmp_path / "cjk")))
    layout = Layout(2048, 128, 20, 64, 16)
    folder = prepared_folder(source, layout)
    with monkeypatch.context() as patch:  # the cache today's code left: its vocabulary uncapped
        patch.setattr(prepare_module, "wordpiece",
                      lambda texts, size: prepare_module._train_wordpiece(list(texts), size, None))
        with pytest.raises(DataError, match="vocabulary of 3,0"):
            prepare(source, layout)
        assert not folder.exists()  # the broken cache was not kept
        prepare_module._build(source, layout, folder)  # one left by an older version
    with pytest.raises(DataError, match="vocabulary of"):
        load(folder, layout)
    prepared = prepare(source, layout)  # found broken, discarded and made anew
    assert prepared.vocab_size <= 2048 and load(folder, layout).vocab_size == prepared.vocab_size


def test_a_failed_phase1_does_not_keep_the_cache(tmp_path, monkeypatch):
    from trainclock.workloads.bert import phase1
    from trainclock.workloads.bert.data.batches import as_tensors
    from trainclock.workloads.bert.workload import data_layout, start_checkpoint

    spec = replace(get_member("bert-tiny"), train_instances=64, eval_samples=16, phase1_steps=1)
    prepared = prepare(parse_source(str(cjk_text(tmp_path / "cjk"))), data_layout(spec))

    def broken(*args):
        raise IndexError("index out of range in self")

    monkeypatch.setattr(phase1, "make_phase1", broken)
    with pytest.raises(IndexError):
        start_checkpoint(spec, prepared, as_tensors(prepared.train))
    assert not prepared.folder.exists()


# 5. readers


def test_a_truncated_or_mislabelled_npz_is_one_line(tmp_path):
    folder = write_npz(tmp_path / "cut", small(4))
    data = (folder / "train.npz").read_bytes()
    for size in (len(data) // 2, len(data) - 10, 30):
        (folder / "train.npz").write_bytes(data[:size])
        assert "train.npz" in refused(folder)
    np.save(folder / "plain.npy", np.zeros(3))
    (folder / "train.npz").write_bytes((folder / "plain.npy").read_bytes())  # an .npy named .npz
    assert "train.npz" in refused(folder, "single .npy array")
    (folder / "train.npz").write_text("input_ids,input_mask\n1,2\n")
    assert "train.npz" in refused(folder)


def test_arrays_of_the_wrong_shape_type_or_rows_are_one_line(tmp_path):
    cases = {
        "flat": (lambda a: a | {"input_ids": a["input_ids"].reshape(-1)}, "input_ids has shape"),
        "rows": (lambda a: a | {"input_mask": a["input_mask"][:2]}, "different numbers of rows"),
        "text": (lambda a: a | {"segment_ids": a["segment_ids"].astype(str)}, "segment_ids is"),
        "wide": (lambda a: a | {"masked_lm_ids": np.zeros((6, PRED + 1), np.int32)}, "masked_lm_ids has shape"),
        "position": (lambda a: a | {"masked_lm_positions": np.full((6, PRED), SEQ, np.int32)}, "masked_lm_positions holds"),
        "empty": (lambda a: {k: v[:0] for k, v in a.items()}, "no instances"),
    }
    for name, (change, match) in cases.items():
        folder = write_npz(tmp_path / name, change(small(6)))
        assert "train.npz" in refused(folder, match), name
    folder = write_npz(tmp_path / "vocab", small(6))
    refused(folder, "input_ids holds", vocab=1000)


def test_hdf5_strings_and_groups_are_one_line(tmp_path):
    arrays = small(4)
    for name, make in (("strings", lambda f: f.create_dataset("input_ids", data=np.array([b"abc"] * 4))),
                       ("group", lambda f: f.create_group("input_ids")),
                       ("rows", None)):
        folder = tmp_path / name
        folder.mkdir()
        hdf5.write_instances(folder / "eval_shard.hdf5", small(2, 1))
        with h5py.File(folder / "train_shard.hdf5", "w") as f:
            for key in hdf5.KEYS:
                if key == "input_ids" and make is not None:
                    make(f)
                elif key == "input_mask" and make is None:
                    f.create_dataset(key, data=arrays[key][:2])
                else:
                    f.create_dataset(key, data=arrays[key])
        assert "train_shard.hdf5" in refused(folder), name


def test_tfrecord_float_features_and_lengths_are_checked(tmp_path):
    row = {k: v[0] for k, v in small(1).items()}
    payload = bytearray(tfrecord.encode_example(row))
    floats = struct.pack("<4f", *row["masked_lm_weights"].tolist())
    at = bytes(payload).index(floats)
    # a 5-byte float list: the packed field's length byte and one more byte
    assert payload[at - 1] == len(floats)
    bad = bytes(payload[:at - 1]) + bytes([len(floats) + 1]) + floats + b"\0" + bytes(payload[at + len(floats):])
    bad = _fix_lengths(bad, row)
    folder = tmp_path / "float"
    folder.mkdir()
    (folder / "part-0").write_bytes(frame(bad))
    (folder / "eval-0").write_bytes(frame(bytes(payload)))
    assert "part-0" in refused(folder, "not a BERT pre-training example")
    for length in (1 << 40, 1 << 63):
        header = struct.pack("<Q", length)
        (folder / "part-0").write_bytes(header + struct.pack("<I", tfrecord.masked_crc(header)) + b"\0" * 64)
        assert "part-0" in refused(folder, "past the file's end")


def _fix_lengths(payload: bytes, row: dict) -> bytes:
    """The example rebuilt with masked_lm_weights' float list one byte longer (the outer lengths too)."""
    entries = b""
    for key in sorted(row):
        values = np.asarray(row[key]).reshape(-1)
        if key == "masked_lm_weights":
            feature = tfrecord._put_field(2, tfrecord._put_field(1, struct.pack(f"<{len(values)}f", *values.tolist()) + b"\0"))
        elif values.dtype.kind == "f":
            feature = tfrecord._put_field(2, tfrecord._put_field(1, struct.pack(f"<{len(values)}f", *values.tolist())))
        else:
            feature = tfrecord._put_field(3, tfrecord._put_field(1, b"".join(tfrecord._put_varint(int(v))
                                                                             for v in values.tolist())))
        entries += tfrecord._put_field(1, tfrecord._put_field(1, key.encode()) + tfrecord._put_field(2, feature))
    return tfrecord._put_field(1, entries)


# fuzz: a damaged file in any of the formats loads or raises DataError

_examples = itertools.count()


@settings(derandomize=True, max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["npz", "hdf5", "tfrecord", "tfrecord-payload"]), how=DAMAGE)
def test_damaged_files_load_or_raise_data_error(tmp_path, which, how):
    folder = tmp_path / f"example-{next(_examples)}"
    train, evaluation = small(3), small(2, 1)
    if which == "npz":
        write_npz(folder, train, evaluation)
        target = folder / "train.npz"
        target.write_bytes(damage(target.read_bytes(), how))
    elif which == "hdf5":
        hdf5.write_instances(folder / "train_shard.hdf5", train)
        hdf5.write_instances(folder / "eval_shard.hdf5", evaluation)
        target = folder / "train_shard.hdf5"
        target.write_bytes(damage(target.read_bytes(), how))
    else:
        folder.mkdir()
        tfrecord.write_instances(folder / "eval-0", evaluation)
        rows = [tfrecord.encode_example({k: v[i] for k, v in train.items()}) for i in range(3)]
        if which == "tfrecord-payload":  # damaged inside valid framing: the parser meets it
            rows[1] = damage(rows[1], how)
            (folder / "part-0").write_bytes(b"".join(frame(r) for r in rows))
        else:
            (folder / "part-0").write_bytes(damage(b"".join(frame(r) for r in rows), how))
    try:
        got, _ = load_folder(str(folder), SEQ, PRED, VOCAB)
        assert got["input_ids"].shape[1] == SEQ and len(got["input_ids"]) == len(got["next_sentence_labels"])
    except DataError as e:
        assert "\n" not in str(e) and str(e)
