"""Fixtures of the planner tests: the published MLPerf data in shared/ (beside the repository, as
CI checks it out) and the calibration built on it, loaded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainclock.planner.calibration.result_files import load_calibration_data
from trainclock.planner.model.hardware import load_catalogue
from trainclock.planner.validation import result_file_checks

MLPERF = (Path(__file__).resolve().parents[2] / ".." / "shared" / "mlperf-results").resolve()


@pytest.fixture(scope="session")
def mlperf_dir() -> Path:
    if not (MLPERF / "gpt3_results_calibration.csv").is_file():
        pytest.fail(f"the planner tests need the MLPerf data in {MLPERF} (shared/ beside the repository)")
    return MLPERF


@pytest.fixture(scope="session")
def catalogue():
    return load_catalogue()


@pytest.fixture(scope="session")
def data(mlperf_dir, catalogue):
    return load_calibration_data(mlperf_dir, catalogue)


@pytest.fixture(scope="session")
def report(data):
    return result_file_checks.validate(data)
