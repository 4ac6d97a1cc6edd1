"""The target evidence reader reads both file formats without being told a workload's key names."""

from __future__ import annotations

import pytest

from trainclock.errors import DataError
from trainclock.workload import evidence


def test_the_current_format_is_keyed_by_metric():
    assert evidence.threshold({"targets": {"loss": 2.5, "accuracy": 0.7}}, "accuracy") == 0.7


def test_an_older_file_is_read_by_its_one_target_key():
    older = {"target_whatever": 4.955, "summary": "reference runs", "budget_tokens": 393216}
    assert evidence.threshold(older, "any metric") == 4.955


@pytest.mark.parametrize("recorded", [{"summary": "no target"}, {"target_a": 1.0, "target_b": 2.0},
                                      {"targets": {"other": 1.0}}, {"target_a": "1.0"}])
def test_no_single_number_is_a_clear_error(recorded: dict):
    with pytest.raises(DataError, match="no number for 'metric'"):
        evidence.threshold(recorded, "metric")
