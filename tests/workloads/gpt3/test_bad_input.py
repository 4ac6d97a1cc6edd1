"""GPT-3's C4 reader over damaged shards (issue 37): every document it yields is text, and a
damaged shard, line or record is one DataError naming the file, never another exception."""

from __future__ import annotations

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainclock.errors import DataError
from trainclock.workloads.gpt3.data.sources import C4Shards, write_c4_shard

VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                   st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


def read(path):
    return [piece.text for piece in C4Shards("c4", (path,)).pieces()]


def test_a_record_whose_text_is_not_a_string_is_one_line(tmp_path):
    shard = tmp_path / "c4-train.00000-of-01024.json.gz"
    with gzip.open(shard, "wt") as f:
        f.write(json.dumps({"text": "a document"}) + "\n" + json.dumps({"text": 7}) + "\n")
    with pytest.raises(DataError, match=r"json.gz:2: not a C4 record"):
        read(shard)


@settings(derandomize=True, max_examples=80, deadline=None)
@given(records=st.lists(st.one_of(st.fixed_dictionaries({"text": VALUES}), VALUES, st.text(max_size=30)),
                        min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.integers(min_value=0, max_value=200)))
def test_damaged_shards_read_or_are_a_data_error(tmp_path_factory, records, cut):
    folder = tmp_path_factory.mktemp("c4")
    good = folder / "good.json.gz"
    write_c4_shard(good, ["one document", "another"])
    shard = folder / "damaged.json.gz"
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    data = gzip.compress(lines.encode("utf-8", "surrogatepass"))
    shard.write_bytes(data[:cut] if cut is not None else data)
    try:
        texts = read(shard)
    except DataError as e:
        assert "\n" not in str(e) and str(shard) in str(e)
    else:
        assert all(isinstance(t, str) for t in texts)
    assert read(good) == ["one document", "another"]
