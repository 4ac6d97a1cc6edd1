"""review/official_code.py reads mlperf_logging's code by its shape, not by benchmark names."""

from __future__ import annotations

import ast

import pytest

from trainclock.errors import DataError
from trainclock.review.official_code import official_code, read_official_code

SUMMARIZER = """
def _compute_strong_score_standalone(benchmark):
    max_dropped_scores = 4 if benchmark == "b" else 1
"""

READER = """
def read_submission_file(result_file, ruleset):
    for str in lines:
        if "submission_benchmark" in str:
            benchmark = json.loads(str)["value"]
        if benchmark == "first" and "eval_accuracy" in str:
            step_unit = "step_num" if ruleset in ["9.9.0"] else "samples_count"
            eval_step = json.loads(str)["metadata"][step_unit]
        elif benchmark in {"x", "y"} and "eval_accuracy" in str:
            conv_epoch = json.loads(str)["metadata"]["samples_count"]
        elif "eval_accuracy" in str:
            conv_epoch = json.loads(str)["metadata"]["epoch_num"]
"""


def _read(reader: str, summarizer: str = SUMMARIZER):
    return read_official_code(ast.parse(reader), ast.parse(summarizer))


def test_the_benchmarks_come_from_the_branches_that_read_each_key():
    code = _read(READER)
    assert code.samples_count_benchmarks == {"x", "y"}
    assert code.first_pass_benchmarks == {"first"}
    assert code.step_num_rulesets == {"9.9.0"}
    assert (code.drops, code.default_drop) == ({"b": 4}, 1)


def test_renamed_benchmarks_are_followed_without_a_change_to_trainclock():
    code = _read(READER.replace('"first"', '"renamed"').replace('{"x", "y"}', '["z"]'))
    assert code.first_pass_benchmarks == {"renamed"} and code.samples_count_benchmarks == {"z"}


@pytest.mark.parametrize(("edit", "says"), [
    (('["samples_count"]', '["samples"]'), "benchmarks read by samples_count"),
    (('"step_num" if', '"steps" if'), "keyed by step_num"),
    (('benchmark == "first" and ', ''), "first passing evaluation"),
])
def test_a_changed_shape_is_a_clear_error(edit: tuple[str, str], says: str):
    with pytest.raises(DataError, match=says) as raised:
        _read(READER.replace(*edit))
    assert "update trainclock/review/official_code.py" in str(raised.value)


def test_the_installed_package_has_the_shapes():
    code = official_code()
    assert code.samples_count_benchmarks and code.first_pass_benchmarks and code.step_num_rulesets
    assert not code.samples_count_benchmarks & code.first_pass_benchmarks
