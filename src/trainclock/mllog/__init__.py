"""MLPerf's `:::MLLOG` log format: writing (reading and checking live in review/)."""

from trainclock.mllog.writer import NullLog, RunLog

__all__ = ["NullLog", "RunLog"]
