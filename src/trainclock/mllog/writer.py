"""Writes one run's MLPerf log with the official MLCommons writer (mlperf_logging.mllog).

The log grows in `<result>.partial` while the run is going and is renamed to its final
name only after run_stop: a crashed run never leaves a file that looks like a result. An
interrupted run without a checkpoint to resume from is closed as aborted (`abort`): its open
block and evaluation end, run_stop says "aborted", and it takes its final name.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import mllog

_ids = itertools.count()
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
_INTERVALS = {"block_stop": "block_start", "eval_stop": "eval_start"}  # the intervals abort() closes


class _RaisingFileHandler(logging.FileHandler):
    """A log line that cannot be written (a full disk) fails the run: logging's default prints
    a traceback to stderr and goes on, leaving a log with holes that looks complete."""

    def handleError(self, record) -> None:
        raise  # the OSError (or other) emit() is handling


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
        self._handler = _RaisingFileHandler(self.partial, mode="w" if resume_at is None else "a", encoding="utf-8")
        self._logger.addHandler(self._handler)
        if echo:
            self._logger.addHandler(logging.StreamHandler())
        # stack offset 2: the file/lineno in metadata is our caller's, not this wrapper's
        self._mllog = mllog.MLLogger(self._logger, default_stack_offset=2, root_dir=_PACKAGE_ROOT)
        # what abort() needs: a resumed log continues a run that started (it has a checkpoint)
        self._run_started, self._run_stopped, self._closed = resume_at is not None, False, False
        self._open: dict[str, dict | None] = {}  # block_start / eval_start not ended yet, with their metadata

    def event(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None) -> None:
        self._mllog.event(key, value, metadata=metadata, time_ms=time_ms)

    def start(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None) -> None:
        self._mllog.start(key, value, metadata=metadata, time_ms=time_ms)
        if key == "run_start":
            self._run_started = True
        elif key in _INTERVALS.values():
            self._open[key] = metadata

    def end(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: int | None = None) -> None:
        self._mllog.end(key, value, metadata=metadata, time_ms=time_ms)
        if key == "run_stop":
            self._run_stopped = True
        elif key in _INTERVALS:
            self._open.pop(_INTERVALS[key], None)

    def flush(self) -> int:
        """Flush to disk; the byte size of the log so far (a resume point)."""
        self._handler.flush()
        os.fsync(self._handler.stream.fileno())
        return self.partial.stat().st_size

    def _close_handlers(self, strict: bool = True) -> None:
        """strict=False: a log being dropped or kept as it is closes even on a full disk."""
        for handler in list(self._logger.handlers):
            self._logger.removeHandler(handler)
            try:
                handler.flush()
                handler.close()
            except OSError:
                if strict:
                    raise
                with contextlib.suppress(OSError):
                    handler.close()

    def finish(self) -> Path:
        """Flush to disk and give the log its final name."""
        self.flush()
        self._close_handlers()
        self._closed = True
        os.replace(self.partial, self.path)
        return self.path

    def discard(self) -> None:
        """Remove the log of a run that never started (bad input found during init)."""
        if self._closed:
            return
        self._close_handlers(strict=False)
        self._closed = True
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        """Stop writing and keep the .partial log as it is (a checkpoint resumes it)."""
        self._close_handlers(strict=False)
        self._closed = True

    def abort(self) -> Path | None:
        """Close the log of a run stopped part-way (interrupted) with no checkpoint to resume
        from: the open evaluation and block end, run_stop says "aborted", and the log takes its
        final name, so the run is a result (aborted) rather than a .partial left for good. A run
        that never reached run_start is discarded (nothing was timed). Returns the log's path."""
        if self._closed:  # finished already (the interrupt came after run_stop), or dropped
            return self.path if self.path.exists() else None
        if not self._run_started:
            self.discard()
            return None
        if not self._run_stopped:
            for stop in ("eval_stop", "block_stop"):  # an evaluation runs inside no block: either order ends both
                start = _INTERVALS[stop]
                if start in self._open:
                    metadata = self._open[start] or {}
                    self.end(stop, metadata={"first_epoch_num": metadata.get("first_epoch_num")}
                             if stop == "block_stop" else dict(metadata))
            self.end("run_stop", metadata={"status": "aborted"})
        return self.finish()


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

    def close(self) -> None:
        pass

    def abort(self) -> None:
        return None
