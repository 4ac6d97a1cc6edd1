"""Writes one run's MLPerf log with the official MLCommons writer (mlperf_logging.mllog).

The log grows in `<result>.partial` while the run is going and is renamed to its final
name only after run_stop: a crashed run never leaves a file that looks like a result.
"""

from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import mllog

_ids = itertools.count()
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])


class RunLog:
    def __init__(self, path: Path, echo: bool = False, resume_at: int | None = None) -> None:
        """With resume_at, continue the partial log of an interrupted run from that byte offset
        (the end of the last line a checkpoint saw), dropping what was written after it."""
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        if resume_at is not None:
            with open(self.partial, "r+b") as f:
                f.truncate(resume_at)
        self._logger = logging.getLogger(f"trainclock.mllog.{os.getpid()}.{next(_ids)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(self.partial, mode="w" if resume_at is None else "a", encoding="utf-8")
        self._logger.addHandler(self._handler)
        if echo:
            self._logger.addHandler(logging.StreamHandler())
        # stack offset 2: the file/lineno in metadata is our caller's, not this wrapper's
        self._mllog = mllog.MLLogger(self._logger, default_stack_offset=2, root_dir=_PACKAGE_ROOT)

    def event(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None) -> None:
        self._mllog.event(key, value, metadata=metadata, time_ms=time_ms)

    def start(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None) -> None:
        self._mllog.start(key, value, metadata=metadata, time_ms=time_ms)

    def end(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None) -> None:
        self._mllog.end(key, value, metadata=metadata, time_ms=time_ms)

    def flush(self) -> int:
        """Flush to disk; the byte size of the log so far (a resume point)."""
        self._handler.flush()
        os.fsync(self._handler.stream.fileno())
        return self.partial.stat().st_size

    def _close_handlers(self) -> None:
        for handler in list(self._logger.handlers):
            handler.flush()
            handler.close()
            self._logger.removeHandler(handler)

    def finish(self) -> Path:
        """Flush to disk and give the log its final name."""
        self.flush()
        self._close_handlers()
        os.replace(self.partial, self.path)
        return self.path

    def discard(self) -> None:
        """Remove the log of a run that never started (bad input found during init)."""
        self._close_handlers()
        self.partial.unlink(missing_ok=True)


class NullLog:
    """The log of a rank that does not write one (all but rank 0)."""

    def event(self, *args, **kwargs) -> None:
        pass

    start = end = event

    def flush(self) -> int:
        return 0

    def finish(self) -> None:
        return None

    def discard(self) -> None:
        pass
