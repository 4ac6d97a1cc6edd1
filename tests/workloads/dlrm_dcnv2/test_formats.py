"""The Criteo day files on tiny folders the tests write: multi-hot and one-hot files read back
exactly (memory-mapped, ids hashed into their tables), batches that depend only on (seed, step)
and span days, and every broken input a one-line DataError that names the file and the fix."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import torch

from tests.workloads.dlrm_dcnv2.files import write_days
from trainclock.errors import DataError
from trainclock.workloads.dlrm_dcnv2.data.criteo import day_paths, read_day
from trainclock.workloads.dlrm_dcnv2.data.dataset import open_days

MULTI_HOT = (3, 1, 2) + (1,) * 23
ROWS = (50, 7, 1000) + (10,) * 23


def test_multi_hot_days_read_back_exactly_and_ids_are_hashed_into_their_tables(tmp_path):
    folder = write_days(tmp_path, 3, 40, MULTI_HOT)
    day = read_day(folder, 1, MULTI_HOT)
    assert isinstance(day.sparse[0], np.memmap) and day.sparse[0].shape == (40, 3)
    with np.load(folder / "day_1_sparse_multi_hot.npz") as npz:
        assert all(np.array_equal(day.sparse[t], npz[str(t)]) for t in range(26))
    days = open_days(folder, 2, ROWS, MULTI_HOT, global_batch_size=16)
    assert days.train_rows == 80 and len(days.validation) == 20  # the first half of the eval day
    rows = days.validation_rows(0, 20)
    expected = np.concatenate([np.load(folder / "day_2_sparse_multi_hot.npz")[str(t)][:20] for t in range(26)], 1)
    hashed = expected % np.repeat(ROWS, MULTI_HOT)
    assert torch.equal(rows["sparse"], torch.from_numpy(hashed.astype(np.int64)))
    assert torch.equal(rows["labels"], torch.from_numpy(np.load(folder / "day_2_labels.npy")[:20, 0].astype(np.float32)))


def test_a_batch_depends_only_on_seed_and_step_and_may_span_two_days(tmp_path):
    folder = write_days(tmp_path, 3, 30, MULTI_HOT)  # 60 train rows: blocks of 20 straddle the day boundary
    days = open_days(folder, 2, ROWS, MULTI_HOT, global_batch_size=20)
    seen = [days.train_batch(7, s, 20)["dense"] for s in range(3)]
    again = open_days(folder, 2, ROWS, MULTI_HOT, global_batch_size=20)
    assert all(torch.equal(a, again.train_batch(7, s, 20)["dense"]) for s, a in enumerate(seen))
    whole = np.concatenate([np.load(folder / f"day_{d}_dense.npy") for d in range(2)])
    assert sorted(a[0, 0].item() for a in seen) == sorted(whole[[0, 20, 40], 0].tolist())  # one epoch visits each block
    assert torch.equal(seen[0], torch.from_numpy(whole[20 * int(np.random.default_rng([7, 0]).permutation(3)[0]):][:20]))


def test_a_rank_reads_and_hashes_only_its_own_rows_of_a_batch(tmp_path):
    """Ids are hashed once in the cluster: each rank builds its rows of the global batch (the
    loop's TrainJob.batch(step, rows)) and hashes those only; the sharded tables exchange hashed ids."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Hashed(TorchDispatchMode):
        ids = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.remainder.Tensor:
                Hashed.ids += args[0].numel()
            return func(*args, **(kwargs or {}))

    folder = write_days(tmp_path, 3, 40, MULTI_HOT)
    days = open_days(folder, 2, ROWS, MULTI_HOT, global_batch_size=20)
    whole = days.train_batch(7, 1, 20)
    with Hashed():
        mine = days.train_batch(7, 1, 20, slice(5, 10))  # rank 1 of 4
    assert Hashed.ids == 5 * sum(MULTI_HOT)
    assert all(torch.equal(mine[k], whole[k][5:10]) for k in whole)


def test_one_hot_files_are_read_when_there_is_no_multi_hot_file(tmp_path):
    one = (1,) * 26
    folder = write_days(tmp_path, 2, 10, one)
    for day in range(2):
        paths = day_paths(folder, day)
        with np.load(paths["multi_hot"]) as npz:
            np.save(paths["one_hot"], np.concatenate([npz[str(t)] for t in range(26)], axis=1))
        paths["multi_hot"].unlink()
    day = read_day(folder, 0, one)
    assert len(day) == 10 and day.sparse[25].shape == (10, 1)
    with pytest.raises(DataError, match=r"day_0_sparse.npy has bags of \[1, 1"):
        read_day(folder, 0, MULTI_HOT)


def broken(tmp_path, damage) -> str:
    folder = write_days(tmp_path, 2, 10, MULTI_HOT)
    damage(day_paths(folder, 0))
    with pytest.raises(DataError) as error:
        open_days(folder, 1, ROWS, MULTI_HOT, global_batch_size=4)
    message = str(error.value)
    assert "\n" not in message
    return message


def truncate(path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


@pytest.mark.parametrize("damage, expected", [
    (lambda p: p["labels"].unlink(), "day_0_labels.npy is missing"),
    (lambda p: p["multi_hot"].unlink(), "day_0_sparse_multi_hot.npz is missing"),
    (lambda p: np.save(p["labels"], np.zeros((9, 1), np.int32)), "labels has 9 rows but the dense features 10"),
    (lambda p: np.save(p["dense"], np.zeros((10, 13), np.float64)), "day_0_dense.npy holds float64, not float32"),
    (lambda p: np.save(p["dense"], np.zeros((10, 12), np.float32)), "has shape (10, 12), not (rows, 13)"),
    (lambda p: truncate(p["dense"], 0.7), "day_0_dense.npy is not a readable .npy file (truncated"),
    (lambda p: truncate(p["multi_hot"], 0.5), "day_0_sparse_multi_hot.npz is not a readable .npz file"),
    (lambda p: np.savez(p["multi_hot"], **{str(t): np.zeros((10, 1), np.int64) for t in range(26)}),
     "table 0 holds int64, not int32"),
    (lambda p: np.savez(p["multi_hot"], **{str(t): np.zeros((10, 1), np.int32) for t in range(25)}),
     "lacks the array 25"),
    (lambda p: np.savez_compressed(p["multi_hot"], **{str(t): np.zeros((10, m), np.int32) for t, m in enumerate(MULTI_HOT)}),
     "is compressed"),
    (lambda p: np.savez(p["multi_hot"], **{str(t): np.zeros((10, 2), np.int32) for t in range(26)}),
     "has bags of [2, 2"),
])
def test_broken_day_files_are_one_line_naming_the_problem(tmp_path, damage, expected):
    assert expected in broken(tmp_path, damage)


def test_a_truncated_member_inside_an_intact_zip_is_caught(tmp_path):
    def shorten(paths):
        with np.load(paths["multi_hot"]) as npz:
            arrays = {k: npz[k] for k in npz.files}
        np.savez(paths["multi_hot"], **arrays)
        data = bytearray(paths["multi_hot"].read_bytes())
        with zipfile.ZipFile(paths["multi_hot"]) as z:  # the zip directory stays; the last member's data goes
            last = z.infolist()[-1]
        paths["multi_hot"].write_bytes(bytes(data[:last.header_offset + 40]) + bytes(data[-22:]))

    assert "day_0_sparse_multi_hot.npz" in broken(tmp_path, shorten)


def test_too_few_samples_for_one_batch_is_one_line(tmp_path):
    folder = write_days(tmp_path, 2, 10, MULTI_HOT)
    with pytest.raises(DataError, match="fewer than one global batch of 64"):
        open_days(folder, 1, ROWS, MULTI_HOT, global_batch_size=64)
    with pytest.raises(DataError, match="does not exist"):
        open_days(tmp_path / "nowhere", 1, ROWS, MULTI_HOT, global_batch_size=4)
