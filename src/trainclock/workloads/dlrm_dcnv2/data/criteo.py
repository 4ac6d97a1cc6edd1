"""The Criteo 1TB files as MLPerf's dlrm_dcnv2 reference reads them, one set per day X:
  day_X_dense.npy             float32 (N, 13), the integer features already log-transformed
  day_X_labels.npy            int32 (N, 1) (or (N,)), 0/1 clicks
  day_X_sparse_multi_hot.npz  uncompressed, arrays "0".."25": int32 (N, bag size of that table)
  day_X_sparse.npy            int32 (N, 26): the one-hot files, read when no multi-hot file is there
Everything is memory-mapped (the .npz members at their offset inside the zip, as the reference's
_load_from_npz does), so a batch is a contiguous slice read from disk; ids are hashed into the
table (id % rows) at batch time, as the reference does in mmap mode. Every problem with a file is
a DataError naming the file and what to do."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.workloads.dlrm_dcnv2.spec import DENSE_FEATURES

TABLES = 26
FIX = "write it again in the Criteo multi-hot format (day_X_dense.npy, day_X_labels.npy, day_X_sparse_multi_hot.npz)"


@dataclass(frozen=True)
class Day:
    """One day's arrays, memory-mapped; sparse holds one (N, bag) array per table."""

    dense: np.ndarray
    labels: np.ndarray
    sparse: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.dense)


def day_paths(folder: Path, day: int) -> dict[str, Path]:
    return {"dense": folder / f"day_{day}_dense.npy", "labels": folder / f"day_{day}_labels.npy",
            "multi_hot": folder / f"day_{day}_sparse_multi_hot.npz", "one_hot": folder / f"day_{day}_sparse.npy"}


def read_day(folder: Path, day: int, multi_hot: tuple[int, ...]) -> Day:
    paths = day_paths(folder, day)
    for key in ("dense", "labels"):
        if not paths[key].is_file():
            raise DataError(f"{paths[key]} is missing: the data folder needs day_0 to day_{day} files; {FIX}")
    dense = _npy(paths["dense"], np.float32)
    labels = _npy(paths["labels"], np.int32)
    if paths["multi_hot"].is_file():
        sparse = _npz_members(paths["multi_hot"])
    elif paths["one_hot"].is_file():
        one_hot = _npy(paths["one_hot"], np.int32)
        if one_hot.ndim != 2 or one_hot.shape[1] != TABLES:
            raise DataError(f"{paths['one_hot']} has shape {one_hot.shape}, not (rows, {TABLES}); {FIX}")
        sparse = [one_hot[:, t:t + 1] for t in range(TABLES)]
    else:
        raise DataError(f"{paths['multi_hot']} is missing (and no one-hot {paths['one_hot'].name}); {FIX}")
    if dense.ndim != 2 or dense.shape[1] != DENSE_FEATURES:
        raise DataError(f"{paths['dense']} has shape {dense.shape}, not (rows, {DENSE_FEATURES}); {FIX}")
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise DataError(f"{paths['labels']} has shape {labels.shape}, not (rows, 1); {FIX}")
    for name, n in (("labels", len(labels)), *((f"sparse table {t}", len(a)) for t, a in enumerate(sparse))):
        if n != len(dense):
            raise DataError(f"day {day} in {folder}: {name} has {n:,} rows but the dense features {len(dense):,}; "
                            f"the day's files must hold the same samples: {FIX}")
    check_labels(paths["labels"], labels)
    widths = tuple(a.shape[1] for a in sparse)
    if widths != tuple(multi_hot):
        source = paths["multi_hot"] if paths["multi_hot"].is_file() else paths["one_hot"]
        raise DataError(f"{source} has bags of {list(widths)} ids; this member needs {list(multi_hot)} "
                        f"(write day_{day}_sparse_multi_hot.npz with those bag sizes)")
    return Day(dense, labels, sparse)


LABEL_CHUNK = 1 << 24  # rows checked at a time: 64 MB of a day's mapped labels in memory at once


def check_labels(path: Path, labels: np.ndarray) -> None:
    """Clicks are 0 or 1: a 7 or a -3 would train (BCE takes any float) and then fail the first
    evaluation's AUC, mid-run. Read in chunks: a full-size day's labels are ~800 MB."""
    for start in range(0, len(labels), LABEL_CHUNK):
        chunk = np.asarray(labels[start:start + LABEL_CHUNK])
        wrong = np.flatnonzero(chunk & ~1)  # 0 and 1 only: any other int32 has a bit set besides the lowest
        if wrong.size:
            row = start + int(wrong[0])
            values = ", ".join(str(v) for v in np.unique(chunk[wrong])[:4])
            raise DataError(f"{path}: labels must be 0 or 1 (no click, click), found {values} (first at row {row:,}); "
                            f"{FIX}")


def _npy(path: Path, dtype) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r")
    except Exception as e:  # numpy's header parser raises many kinds (ValueError, SyntaxError, TokenError, ...)
        raise DataError(f"{path} is not a readable .npy file (truncated or corrupt: {_first_line(e)}); {FIX}") from None
    if array.dtype != dtype:
        raise DataError(f"{path} holds {array.dtype}, not {np.dtype(dtype)}; {FIX}")
    return array


def _npz_members(path: Path) -> list[np.ndarray]:
    """Each table's array memory-mapped at its offset inside the (uncompressed) zip."""
    try:
        with zipfile.ZipFile(path) as archive:
            arrays = []
            for t in range(TABLES):
                name = f"{t}.npy"
                if name not in archive.NameToInfo:
                    raise DataError(f"{path} lacks the array {t!r} (one per table, \"0\" to \"{TABLES - 1}\"); {FIX}")
                arrays.append(_member(archive, path, name))
            return arrays
    except DataError:
        raise
    except Exception as e:  # zipfile's and numpy's header readers raise many kinds for a damaged file
        raise DataError(f"{path} is not a readable .npz file (truncated or corrupt: {_first_line(e)}); {FIX}") from None


def _member(archive: zipfile.ZipFile, path: Path, name: str) -> np.ndarray:
    info = archive.NameToInfo[name]
    if info.compress_type != zipfile.ZIP_STORED:
        raise DataError(f"{path} is compressed; write it with np.savez (not savez_compressed) so it can be memory-mapped")
    with archive.open(name) as member:  # checks the local header; then read the .npy header inside
        version = np.lib.format.read_magic(member)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(member)
        header = member.tell()
    if dtype != np.int32:
        raise DataError(f"{path}: table {name[:-4]} holds {dtype}, not int32; {FIX}")
    if len(shape) != 2:
        raise DataError(f"{path}: table {name[:-4]} has shape {shape}, not (rows, bag size); {FIX}")
    with open(path, "rb") as f:  # the data start after the local file header
        f.seek(info.header_offset + 26)
        name_len, extra_len = np.frombuffer(f.read(4), dtype="<u2")
    offset = info.header_offset + 30 + int(name_len) + int(extra_len) + header
    if offset + int(np.prod(shape)) * 4 > path.stat().st_size:
        raise DataError(f"{path} is truncated (table {name[:-4]} runs past the end of the file); {FIX}")
    return np.memmap(path, dtype=np.int32, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def write_day(folder: Path, day: int, dense: np.ndarray, labels: np.ndarray, sparse: list[np.ndarray]) -> None:
    """One day's files in the official layout (np.save / uncompressed np.savez), as the reference's
    materialize_synthetic_multihot_dataset.py writes them."""
    paths = day_paths(folder, day)
    np.save(paths["dense"], np.ascontiguousarray(dense, dtype=np.float32))
    np.save(paths["labels"], np.ascontiguousarray(labels, dtype=np.int32).reshape(-1, 1))
    np.savez(paths["multi_hot"], **{str(t): np.ascontiguousarray(a, dtype=np.int32) for t, a in enumerate(sparse)})


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
