"""Reviewing MLPerf logs: time-to-train, compliance and scoring."""
