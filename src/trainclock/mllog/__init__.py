"""MLPerf's `:::MLLOG` log format: writing, reading events, and the progress codec (progress.py: how a
run's progress count is written and read back). Checking the rules lives in review/."""

from trainclock.mllog.writer import NullLog, RunLog

__all__ = ["NullLog", "RunLog"]
