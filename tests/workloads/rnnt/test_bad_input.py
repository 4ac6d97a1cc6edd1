"""Bad RNN-T input is one DataError line when it is loaded or prepared, never a traceback: transcripts
that are not UTF-8, manifests whose entries are null, bare file names or missing files, a garbage
sentencepiece model (refused by `data prepare`, not by the run), and sentencepiece's own messages
shown from their start."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.damage import DAMAGE, damage
from tests.workloads.helpers import error_line
from trainclock.errors import DataError
from trainclock.workloads.rnnt.data import tokenizer
from trainclock.workloads.rnnt.data.librispeech import read_split
from trainclock.workloads.rnnt.data.prepare import SPM_NAME, prepare_official
from trainclock.workloads.rnnt.data.sample import flac_bytes, write_tree
from trainclock.workloads.rnnt.features import SAMPLE_RATE

WORDS = "one two three four five six seven eight nine ten red green blue".split()
TONE = np.sin(np.arange(SAMPLE_RATE // 4) * 0.05).astype(np.float32) * 0.3


def librispeech(folder: Path) -> Path:
    """train-clean-100 and dev-clean, two utterances each, as published (FLAC + .trans.txt)."""
    audio = flac_bytes(TONE)
    for split in ("train-clean-100", "dev-clean"):
        write_tree(folder / "LibriSpeech", split, {f"84-121-000{i}": (audio, " ".join(WORDS[i:i + 4]).upper())
                                                   for i in range(2)})
    return folder


def manifest(folder: Path, entries) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.wav").write_bytes(b"")  # existence is what the manifest check reads
    path = folder / "librispeech-dev-clean-wav.json"
    path.write_text(json.dumps(entries))
    return path


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert text and "\n" not in text
    return text


@pytest.fixture(scope="module")
def spm_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("spm") / "m.model"
    rng = np.random.default_rng(0)
    tokenizer.train([" ".join(rng.choice(WORDS, 6)) for _ in range(200)], 30, path)
    return path.read_bytes()


def test_a_transcript_that_is_not_utf8_is_one_line(tmp_path):
    data = librispeech(tmp_path)
    listing = data / "LibriSpeech" / "dev-clean" / "84" / "121" / "84-121.trans.txt"
    listing.write_bytes(b"84-121-0000 CAF\xc9 AU LAIT\n")
    with pytest.raises(DataError, match="not UTF-8") as e:
        read_split(data / "LibriSpeech" / "dev-clean")
    assert str(listing) in one_line(e)


@pytest.mark.parametrize("entries, match", [
    ([{"transcript": None, "original_duration": 0.2, "files": [{"fname": "a.wav", "speed": 1}]}], "transcript null"),
    ([{"transcript": "one", "original_duration": 0.2, "files": ["a.wav"]}], "files"),
    ([{"transcript": "one", "original_duration": 0.2, "files": "a.wav"}], "files"),
    (["a.wav", "b.wav"], "entry 0 is"),
    ({"a.wav": "one"}, "JSON dict"),
    ([{"transcript": "one", "original_duration": "long", "files": [{"fname": "a.wav"}]}], "not a number"),
    ([{"transcript": "one", "original_duration": 0.2, "files": [{"fname": "gone.wav", "speed": 1}]}], "is missing"),
    ([{"transcript": "one", "original_duration": 0.2, "files": [{"fname": None, "speed": 1}]}], "fname null"),
])
def test_bad_manifest_entries_are_one_line(tmp_path, entries, match):
    path = manifest(tmp_path, entries)
    with pytest.raises(DataError, match=match) as e:
        read_split(path)
    assert str(path) in one_line(e) or "gone.wav" in one_line(e)


def test_a_manifest_that_is_not_utf8_is_one_line(tmp_path):
    path = manifest(tmp_path, [])
    path.write_bytes(b'[{"transcript": "caf\xe9"}]')
    with pytest.raises(DataError, match="not UTF-8") as e:
        read_split(path)
    assert str(path) in one_line(e)


def test_a_garbage_sentencepiece_model_fails_data_prepare(tmp_path, cli):
    data = librispeech(tmp_path / "data")
    model = data / "sentencepieces" / SPM_NAME
    model.parent.mkdir()
    model.write_bytes(b"\x00not a sentencepiece model" * 20)
    with pytest.raises(DataError, match="is not a sentencepiece model") as e:
        prepare_official(data, 30)
    assert str(model) in one_line(e)
    line = error_line(cli("data", "prepare", "rnnt-librispeech", "--data", data))
    assert SPM_NAME in line and "could not parse" in line


def test_sentencepiece_errors_show_their_first_meaningful_line(tmp_path):
    with pytest.raises(DataError) as e:
        tokenizer.train(["one two", "two three"], 500, tmp_path / "m.model")
    text = one_line(e)
    assert "Vocabulary size too high (500)" in text and "src/" not in text and "RNAL" not in text
    (tmp_path / "bad.model").write_bytes(b"garbage")
    with pytest.raises(DataError, match="INTERNAL: could not parse") as e:
        tokenizer.load(tmp_path / "bad.model", 30)
    one_line(e)


# fuzz: damaged transcripts, manifests and sentencepiece models load or raise DataError

_examples = itertools.count()


@settings(derandomize=True, max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.sampled_from(["transcripts", "manifest", "sentencepiece"]), how=DAMAGE)
def test_damaged_files_load_or_raise_data_error(tmp_path, spm_bytes, which, how):
    folder = tmp_path / f"example-{next(_examples)}"
    try:
        if which == "transcripts":
            data = librispeech(folder)
            listing = data / "LibriSpeech" / "dev-clean" / "84" / "121" / "84-121.trans.txt"
            listing.write_bytes(damage(listing.read_bytes(), how))
            for u in read_split(data / "LibriSpeech" / "dev-clean"):
                assert isinstance(u.transcript, str) and u.duration > 0
        elif which == "manifest":
            path = manifest(folder, [{"transcript": "One two", "original_duration": 0.25, "original_num_samples": 4000,
                                      "files": [{"fname": "a.wav", "speed": 1, "duration": 0.25}]},
                                     {"transcript": "three", "original_duration": 0.5,
                                      "files": [{"fname": "a.wav", "speed": 1.0, "duration": 0.5}]}])
            path.write_bytes(damage(path.read_bytes(), how))
            for u in read_split(path):
                assert isinstance(u.transcript, str) and Path(u.path).is_file()
        else:
            folder.mkdir()
            path = folder / SPM_NAME
            path.write_bytes(damage(spm_bytes, how))
            processor = tokenizer.load(path, 30)
            processor.encode("one two three")
    except DataError as e:
        assert "\n" not in str(e) and str(e)
