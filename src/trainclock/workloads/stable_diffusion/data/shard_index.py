"""The webdataset shards read on demand: an index of where each licensed sample's .npy moments and
.txt caption lie (shard, byte offset, size), and a step reads its batch's samples and nothing more.
The reference's 6,513,144 moments (8 x 64 x 64) fill about 420 GB, so no node can hold them in
memory; the index is 40 bytes a sample (260 MB for the full set) and is cached beside the data home,
keyed by the shards' names, sizes and modification times, so a second run does not rescan them."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainclock.errors import DataError
from trainclock.storage import atomic_writer, prepared_path

INDEX_VERSION = 1
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp")


@dataclass
class ShardIndex:
    shards: list[Path]
    shard: np.ndarray  # int32 per sample: which shard
    npy: np.ndarray  # int64 (n, 2): byte offset and size of the .npy member
    txt: np.ndarray  # int64 (n, 2): byte offset and size of the .txt member

    def __len__(self) -> int:
        return len(self.shard)


def scan_shard(path: Path, keep: set[str] | None) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(.npy, .txt) (offset, size) of each sample kept in one uncompressed tar, in file order. Reads the
    headers only: tarfile seeks past each member's data."""
    npy, txt, samples = [], [], {}
    try:
        with tarfile.open(path, "r:") as tar:  # "r:": offsets into a compressed stream could not be read directly
            for member in tar:
                if not member.isfile():
                    continue
                stem, _, ext = member.name.rsplit("/", 1)[-1].partition(".")
                samples.setdefault(stem, {})[ext] = (member.offset_data, member.size)
    except (OSError, tarfile.TarError) as e:
        raise DataError(f"cannot read webdataset shard {path} ({e}); the shards must be uncompressed .tar "
                        "files as the reference's laion400m scripts write them") from None
    for key, files in samples.items():
        if keep is not None and key not in keep:
            continue
        if "npy" not in files:
            kind = "an image" if any(e in files for e in IMAGE_EXTENSIONS) else "no .npy"
            raise DataError(f"sample {key} in {path} has {kind} but no .npy moments: training needs VAE moments; "
                            "convert raw images with the reference's laion400m-convert-images-to-moments")
        if "txt" not in files:
            raise DataError(f"sample {key} in {path} has no .txt caption")
        npy.append(files["npy"])
        txt.append(files["txt"])
    return npy, txt


def build_index(shards: list[Path], keep: set[str] | None) -> ShardIndex:
    shard, npy, txt = [], [], []
    for number, path in enumerate(shards):
        found_npy, found_txt = scan_shard(path, keep)
        shard += [number] * len(found_npy)
        npy += found_npy
        txt += found_txt
    if not shard:
        raise DataError(f"the shards in {shards[0].parent} hold no licensed samples")
    return ShardIndex(shards, np.asarray(shard, np.int32), np.asarray(npy, np.int64).reshape(-1, 2),
                      np.asarray(txt, np.int64).reshape(-1, 2))


def _cache_path(shards: list[Path], extra: list[Path]) -> Path:
    stamps = [(p.resolve(), (st := p.stat()).st_size, st.st_mtime_ns) for p in shards + extra]
    return prepared_path("sd-shard-index", INDEX_VERSION, *(part for stamp in stamps for part in stamp), digits=16,
                         suffix=".npz")


def _load_cache(cache: Path, shards: list[Path]) -> ShardIndex | None:
    """The cached index, or None where it is missing or damaged in any way (a cut or overwritten .npz
    raises BadZipFile, EOFError, zlib.error, ... or loads arrays that cannot be an index)."""
    try:
        with np.load(cache, allow_pickle=False) as saved:
            index = ShardIndex(shards, np.asarray(saved["shard"]), np.asarray(saved["npy"]), np.asarray(saved["txt"]))
    except Exception:  # noqa: BLE001 - a cache: whatever is wrong with it, the shards are scanned again
        return None
    n = len(index.shard) if index.shard.ndim == 1 else -1
    if (n <= 0 or index.shard.dtype.kind not in "iu" or index.npy.dtype.kind not in "iu"
            or index.txt.dtype.kind not in "iu" or index.npy.shape != (n, 2) or index.txt.shape != (n, 2)
            or int(index.shard.min()) < 0 or int(index.shard.max()) >= len(shards)
            or int(index.npy.min()) < 0 or int(index.txt.min()) < 0):
        return None
    return index


def shard_index(folder: Path, keep: Callable[[], set[str] | None]) -> ShardIndex:
    """The index of the *.tar shards in `folder` (cached); `keep` gives the licensed keys (None: all),
    and is only called when the index must be built."""
    shards = sorted(folder.glob("*.tar"))
    if not shards:
        raise DataError(f"no webdataset shards (*.tar) in {folder}")
    cache = _cache_path(shards, sorted(folder.glob("*.parquet")))
    cached = _load_cache(cache, shards)
    if cached is not None:
        return cached
    # missing or damaged: rebuilt below (the data are the truth, the cache only saves a scan) and
    # written over the damaged copy, so no later run meets it again
    index = build_index(shards, keep())
    with atomic_writer(cache, "wb") as f:
        np.savez(f, shard=index.shard, npy=index.npy, txt=index.txt)
    return index


class _Reader:
    """Byte ranges of the shards through one open descriptor per shard (pread: no shared file position)."""

    def __init__(self, index: ShardIndex):
        self.index = index
        self._fds: dict[int, int] = {}

    def read(self, sample: int, where: np.ndarray) -> bytes:
        number = int(self.index.shard[sample])
        if number not in self._fds:
            self._fds[number] = os.open(self.index.shards[number], os.O_RDONLY)
        offset, size = int(where[sample, 0]), int(where[sample, 1])
        data = os.pread(self._fds[number], size, offset)
        if len(data) != size:
            raise DataError(f"{self.index.shards[number]} is shorter than when it was indexed (sample at byte "
                            f"{offset}); restore the shard, or remove it so the index is rebuilt")
        return data

    def where(self, sample: int) -> str:
        return f"the sample at byte {int(self.index.npy[sample, 0])} of {self.index.shards[int(self.index.shard[sample])]}"

    def __del__(self):
        for fd in self._fds.values():
            os.close(fd)


class LazyMoments:
    """moments[pick] -> float32 (len(pick), 8, h, w), read from the shards at that moment."""

    def __init__(self, index: ShardIndex):
        self.reader = _Reader(index)

    def __len__(self) -> int:
        return len(self.reader.index)

    def __getitem__(self, pick: torch.Tensor) -> torch.Tensor:
        arrays = []
        for sample in torch.as_tensor(pick).reshape(-1).tolist():
            try:
                array = np.load(io.BytesIO(self.reader.read(sample, self.reader.index.npy)), allow_pickle=False)
            except (ValueError, EOFError, OSError) as e:
                raise DataError(f"{self.reader.where(sample)}: bad .npy ({e})") from None
            if array.dtype.kind not in "fiu":
                raise DataError(f"{self.reader.where(sample)}: moments of dtype {array.dtype}, expected numbers "
                                "(float16 VAE moments, as the reference's laion400m scripts write them)")
            if array.ndim != 3 or (arrays and array.shape != arrays[0].shape):
                raise DataError(f"{self.reader.where(sample)}: moments of shape {array.shape}, expected "
                                f"{arrays[0].shape if arrays else '8 x h x w'} like the rest")
            arrays.append(array)
        return torch.from_numpy(np.stack(arrays).astype(np.float32))


class LazyCaptions:
    """ids[pick] -> the token ids of those samples' captions, read and tokenized at that moment."""

    def __init__(self, index: ShardIndex, tokenizer: Callable[[list[str]], torch.Tensor]):
        self.reader = _Reader(index)
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return len(self.reader.index)

    def __getitem__(self, pick: torch.Tensor) -> torch.Tensor:
        texts = [self.reader.read(s, self.reader.index.txt).decode("utf-8", errors="replace").strip()
                 for s in torch.as_tensor(pick).reshape(-1).tolist()]
        return self.tokenizer(texts)
