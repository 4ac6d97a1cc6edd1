"""Where trainclock keeps its files, and how it writes them without ever leaving half a file; the
prepared data every benchmark caches under the data home, keyed by a hash of its inputs and built
once (prepared_path, build_once)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO


def data_home() -> Path:
    """The data directory: $TRAINCLOCK_HOME, else $XDG_DATA_HOME/trainclock, else ~/.local/share/trainclock."""
    if home := os.environ.get("TRAINCLOCK_HOME"):
        return Path(home)
    xdg = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(xdg) / "trainclock"


def cache_key(*parts: object, digits: int = 12) -> str:
    """The first `digits` hex digits of the SHA-256 of `parts` (each formatted as an f-string would)
    joined by NUL bytes: the key of a cache made from these inputs and settings, new whenever any
    of them changes."""
    return hashlib.sha256("\0".join(map(format, parts)).encode()).hexdigest()[:digits]


def files_fingerprint(paths: Iterable[Path]) -> str:
    """The SHA-256 of each file's resolved path, size and modification time: a new value when any
    of the files is edited, replaced or moved, without reading them."""
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class InputFiles:
    """Named input files (a corpus, shards): their fingerprint keys what is prepared from them."""

    name: str
    paths: tuple[Path, ...]

    def fingerprint(self) -> str:
        return files_fingerprint(self.paths)


def prepared_path(name: str, *parts: object, digits: int = 12, suffix: str = "") -> Path:
    """<data home>/prepared/<name>-<cache_key(*parts)><suffix>: where a benchmark keeps what it
    prepared from `parts` (its inputs, settings and format version)."""
    return data_home() / "prepared" / f"{name}-{cache_key(*parts, digits=digits)}{suffix}"


def build_once(folder: Path, marker: str, build: Callable[[Path], object], force: bool = False) -> Path:
    """`folder`, built first where it does not hold `marker` yet: `build(staging)` fills a
    staged_folder and writes `marker` last, so a killed build never leaves a half cache looking
    complete, and the staging folders of dead processes are removed. `force` discards the folder
    first, in one step."""
    if force:
        discard_folder(folder)
    if not (folder / marker).exists():
        with staged_folder(folder, marker) as staging:
            build(staging)
    return folder


# a file's mode as a plain open() would create it: the kernel takes the umask off; never executable
FILE_MODE = 0o666
_TEMP_ATTEMPTS = 100


@contextlib.contextmanager
def atomic_writer(path: Path, mode: str = "w") -> Iterator[IO]:
    """Write to a temporary file beside `path`, fsync it, then rename it over `path`.
    A crash at any point leaves either the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_writer(path, "w") as f:
        f.write(text)


def _create_temporary(path: Path) -> tuple[int, Path]:
    """A new, empty file beside `path`, opened for writing. Created with FILE_MODE through the
    umask as any open() is: mkstemp's 0600 would need a chmod after reading the umask, and
    reading it means setting it, which would hand other threads' new files a wrong mode."""
    for _ in range(_TEMP_ATTEMPTS):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), FILE_MODE), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path} after {_TEMP_ATTEMPTS} tries")


@contextlib.contextmanager
def staged_folder(folder: Path, marker: str) -> Iterator[Path]:
    """A staging folder beside `folder`, to be filled in the block; `marker` (a file written in it)
    means complete. On a clean exit the staging folder is renamed to `folder` whole, so a folder
    holding its marker is always complete. When another process published a complete `folder`
    first, theirs stays (its reader may be using it) and this one is dropped; a folder without its
    marker (a stale copy from an older layout) is replaced. Staging and discarded folders that a
    killed process left beside `folder` are removed first."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(folder)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=_private_prefix(folder)))
    try:
        yield staging
        if not (staging / marker).exists():
            raise FileNotFoundError(f"{staging / marker} was not written; the staged folder is incomplete")
        if folder.exists() and not (folder / marker).exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / marker).exists():  # not a finished twin: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def discard_folder(folder: Path) -> None:
    """Removes `folder` so that no reader ever finds part of it: renamed aside in one step first (a
    reader then finds nothing, and prepares anew), then deleted. A kill during the deletion leaves
    only the renamed copy, which the next staged_folder beside it removes."""
    aside = folder.with_name(f"{_private_prefix(folder)}{secrets.token_hex(4)}.discarded")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def remove_abandoned(folder: Path) -> None:
    """Deletes the staging and discarded folders beside `folder` whose process, on this host, has
    died (a kill -9 mid-prepare); another live process's, or another host's, stay."""
    host = _host()
    for candidate in folder.parent.glob(f".{folder.name}.{host}-*"):
        pid = candidate.name[len(f".{folder.name}.{host}-"):].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(candidate, ignore_errors=True)


def _private_prefix(folder: Path) -> str:
    # host and pid in the name: remove_abandoned can tell a dead process's folder from a live one's
    return f".{folder.name}.{_host()}-{os.getpid()}."


def _host() -> str:
    return "".join(c if c.isalnum() or c == "-" else "_" for c in os.uname().nodename) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
