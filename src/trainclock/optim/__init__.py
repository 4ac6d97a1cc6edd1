"""Optimizers and learning-rate schedules the workloads choose from, each with the MLPerf log keys
its rules require. The loop sees only the OptimizerSetup protocol (base.py)."""

from trainclock.optim.base import OptimizerSetup

__all__ = ["OptimizerSetup"]
