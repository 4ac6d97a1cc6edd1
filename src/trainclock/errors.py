"""Errors a user can act on. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations

import errno
from pathlib import Path


class TrainclockError(Exception):
    """A problem with the user's input or environment, with what to do about it."""

    exit_code = 2


class UsageError(TrainclockError):
    """A bad argument, name or setting."""


class DataError(TrainclockError):
    """A missing, corrupt or unusable data file."""


class ResourceError(TrainclockError):
    """The machine cannot run what was asked (memory, devices)."""


# errno -> (what happened, what to do): a file trainclock cannot write, said in one line
_FILE_ERRORS = {
    errno.ENOSPC: ("no space left on device", "free space or choose {other}"),
    errno.EDQUOT: ("disk quota exceeded", "free space or choose {other}"),
    errno.EACCES: ("permission denied", "make it writable or choose {other}"),
    errno.EPERM: ("permission denied", "make it writable or choose {other}"),
    errno.EROFS: ("read-only file system", "choose {other}"),
}


def file_error(e: OSError, where: Path | str | None = None, other: str = "another output path") -> str | None:
    """"<what> writing <file>; <what to do>" for a full disk or a permission error (the file from
    the error, else `where`), or None for any other error."""
    if e.errno not in _FILE_ERRORS:
        return None
    what, todo = _FILE_ERRORS[e.errno]
    return f"{what} writing {e.filename or where or 'a file'}; {todo.format(other=other)}"


def require_folder(folder: Path | str, hint: str) -> Path:
    """`folder` as a Path when it is a folder; otherwise a one-line DataError that says whether it
    is missing or a file, followed by `hint` (what the benchmark wants there)."""
    folder = Path(folder).expanduser()
    if folder.is_dir():
        return folder
    state = "is a file, not a folder" if folder.exists() else "does not exist"
    raise DataError(f"data folder {folder} {state}; {hint}")
