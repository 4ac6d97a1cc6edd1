"""The target evidence: one format for every shipped file, and the reader's clear errors."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from trainclock.errors import DataError
from trainclock.workload import evidence, registry

KEYS = {"targets", "summary", "budget_samples", "measured_within_samples", "machine", "precision",
        "load_average_1_5_15", "torch", "runs"}
RUN_KEYS = {"seed", "precision", "evals", "samples_per_s", "units_per_s", "mfu", "final_train_loss", "time_to_target_s"}


def shipped() -> list[Path]:
    return sorted(path for workload in registry.workloads()
                  for path in (Path(inspect.getfile(type(workload))).parent / "targets").glob("*.json"))


def test_every_shipped_evidence_file_has_the_one_format():
    files = shipped()
    assert len(files) >= 19
    for path in files:
        recorded = json.loads(path.read_text())
        assert KEYS <= set(recorded), f"{path.name} lacks {sorted(KEYS - set(recorded))}"
        assert all(isinstance(v, float | int) for v in recorded["targets"].values()), path.name
        assert recorded["measured_within_samples"] <= recorded["budget_samples"], path.name
        for run in recorded["runs"]:
            assert RUN_KEYS <= set(run), f"{path.name} seed {run.get('seed')} lacks {sorted(RUN_KEYS - set(run))}"
            for row in run["evals"]:
                time_s, samples, units, metrics = row  # [time_s, samples, units, {metric: value}]
                assert samples > 0 and units > 0 and set(recorded["targets"]) <= set(metrics), (path.name, row)


def test_the_target_is_keyed_by_metric():
    assert evidence.threshold({"targets": {"loss": 2.5, "accuracy": 0.7}}, "accuracy") == 0.7


@pytest.mark.parametrize("recorded", [{"summary": "no target"}, {"target_a": 1.0},
                                      {"targets": {"other": 1.0}}, {"targets": {"metric": "1.0"}}])
def test_no_number_for_the_metric_is_a_clear_error(recorded: dict):
    with pytest.raises(DataError, match="no number for 'metric'"):
        evidence.threshold(recorded, "metric")
