"""Bad Criteo day files are refused at load, in one line naming the file: click labels other than
0/1 (in the official multi-hot days and in a tier's own prepared days), which would otherwise
train and then fail the first evaluation; and any damaged day file either loads or is that line."""

from __future__ import annotations

import functools
import io
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.workloads.dlrm_dcnv2.files import write_days
from trainclock.distributed.context import single_process
from trainclock.errors import DataError
from trainclock.workload.base import RunSettings
from trainclock.workloads.dlrm_dcnv2.data import criteo
from trainclock.workloads.dlrm_dcnv2.data.criteo import day_paths, read_day
from trainclock.workloads.dlrm_dcnv2.data.dataset import open_days
from trainclock.workloads.dlrm_dcnv2.spec import get_member
from trainclock.workloads.dlrm_dcnv2.workload import load_days

MULTI_HOT = (3, 1, 2) + (1,) * 23
ROWS = (50, 7, 1000) + (20,) * 23


def one_line(e: pytest.ExceptionInfo) -> str:
    message = str(e.value)
    assert message and "\n" not in message
    return message


def set_labels(path: Path, rows: dict[int, int]) -> None:
    labels = np.load(path)
    for row, value in rows.items():
        labels[row] = value
    np.save(path, labels)


@pytest.mark.parametrize("values, shown", [({3: 7}, "7"), ({5: -3}, "-3"), ({1: 7, 9: -3}, "-3, 7")])
@pytest.mark.parametrize("day", [0, 2], ids=["train day", "eval day"])
def test_criteo_labels_other_than_0_1_are_refused_at_load(tmp_path, values, shown, day):
    folder = write_days(tmp_path, 3, 20, MULTI_HOT)
    path = day_paths(folder, day)["labels"]
    set_labels(path, values)
    with pytest.raises(DataError, match=f"labels must be 0 or 1 .*found {shown} \\(first at row {min(values)}\\)") as e:
        open_days(folder, 2, ROWS, MULTI_HOT, global_batch_size=8)
    assert str(path) in one_line(e)


def test_flat_label_arrays_are_checked_too_and_a_large_day_in_chunks(tmp_path, monkeypatch):
    folder = write_days(tmp_path, 1, 40, MULTI_HOT)
    path = day_paths(folder, 0)["labels"]
    labels = np.load(path)[:, 0]
    labels[37] = 2
    np.save(path, labels)  # (N,), as some writers leave them
    monkeypatch.setattr(criteo, "LABEL_CHUNK", 16)  # the bad row in the third chunk
    with pytest.raises(DataError, match=r"found 2 \(first at row 37\)"):
        read_day(folder, 0, MULTI_HOT)


def test_a_tiers_own_days_with_bad_labels_are_refused_at_load(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCLOCK_HOME", str(tmp_path / "home"))
    spec = get_member("dlrm-tiny")
    days, dataset = load_days(spec, RunSettings(), single_process())  # prepares the tier's click log
    assert dataset == "clicks" and set(np.unique(days.validation.labels)) == {0, 1}
    path = next((tmp_path / "home").rglob("day_1_labels.npy"))
    set_labels(path, {100: 7})
    with pytest.raises(DataError, match="labels must be 0 or 1 .*found 7") as e:
        load_days(spec, RunSettings(), single_process())
    assert str(path) in one_line(e)


# fuzz: damaged day files load or are one DataError line

@functools.cache
def originals() -> dict[str, bytes]:
    root = Path(tempfile.mkdtemp(prefix="dlrm-originals-"))
    write_days(root, 2, 12, MULTI_HOT)
    files = {key: path.read_bytes() for key, path in day_paths(root, 0).items() if path.is_file()}
    shutil.rmtree(root)
    return files


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)),
                                             min_size=1, max_size=8)),
    st.tuples(st.just("header"), st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=4)),
                                          min_size=1, max_size=4)),
    st.tuples(st.just("labels"), st.lists(st.integers(-2**31, 2**31 - 1), min_size=12, max_size=12)),
)


def damage(data: bytes, how) -> bytes:
    kind, detail = how
    if kind == "cut":
        return data[:int(len(data) * detail)]
    if kind == "labels":
        return npy_bytes(np.array(detail, np.int32).reshape(-1, 1))
    data = bytearray(data)
    span = 128 if kind == "header" else len(data)  # the .npy header, or anywhere (zip directory included)
    for where, new in detail:
        at = int(where * (min(span, len(data)) - 1))
        data[at:at + len(new)] = new
    return bytes(data)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["dense", "labels", "multi_hot"]), how=DAMAGE)
def test_a_damaged_day_loads_or_is_one_line(tmp_path_factory, which, how):
    folder = tmp_path_factory.mktemp("days")
    for day in (0, 1):
        for key, data in originals().items():
            hurt = day == 1 and key == which and not (how[0] == "labels" and key != "labels")
            day_paths(folder, day)[key].write_bytes(damage(data, how) if hurt else data)
    try:
        days = open_days(folder, 1, ROWS, MULTI_HOT, global_batch_size=4)
    except DataError as e:
        assert str(folder) in str(e) and "\n" not in str(e)
    else:
        batch = days.validation_rows(0, len(days.validation))
        assert set(np.unique(batch["labels"].numpy())) <= {0.0, 1.0}
        assert days.train_batch(0, 0, 4)["dense"].shape == (4, 13)
