"""The scoring rules: runs per benchmark, the olympic mean, failed runs, scaling.json."""

from __future__ import annotations

import json

import pytest
from mlperf_logging.benchmark_meta import get_allowed_benchmarks, get_result_file_counts
from mlperf_logging.rcp_checker.rcp_checker import submission_runs

from trainclock.errors import DataError
from trainclock.review.scoring import olympic_mean, scoring_rule, supported_rounds
from trainclock.review.tree import review_path

RUNS = {"gpt3": 3, "bert": 10, "stable_diffusion": 10, "resnet": 5, "ssd": 5, "maskrcnn": 5, "rnnt": 10,
        "dlrm_dcnv2": 10, "unet3d": 40}


def test_runs_per_benchmark_are_the_rules_and_agree_with_mlperf_logging():
    for round_ in ("3.0", "3.1"):
        for benchmark in get_allowed_benchmarks("training", round_):
            rule = scoring_rule(benchmark, round_)
            assert rule.runs == RUNS[benchmark] == get_result_file_counts("training")[benchmark]
            assert rule.runs == submission_runs["training"][benchmark]
            assert rule.drop == (4 if benchmark == "unet3d" else 1)
            assert scoring_rule(benchmark).runs == rule.runs  # without a round: the same runs
    assert supported_rounds()[:2] == ["3.0", "3.1"]  # and every later one: test_rounds.py
    assert scoring_rule("maskrcnn", "4.0") is None and scoring_rule(None) is None


@pytest.mark.parametrize("minutes, drop, score", [
    ([3.0, 1.0, 2.0], 1, 2.0),
    ([1.0, None, 2.0], 1, 2.0),  # the failure is the slowest: drop it and the fastest
    ([1.0, None, None], 1, None),  # more failures than may be dropped
    ([5.0, 1.0, 2.0, 3.0, 4.0], 1, 3.0),
    ([1.0, 2.0], 1, None),  # nothing left to average
    (list(range(1, 41)), 4, sum(range(5, 37)) / 32),  # unet3d: 4 and 4 of 40
    ([None] * 4 + list(range(1, 37)), 4, sum(range(5, 37)) / 32),  # unet3d: 4 may fail
    ([None] * 5 + list(range(1, 36)), 4, None),
])
def test_olympic_mean(minutes, drop, score):
    assert olympic_mean(minutes, drop) == (pytest.approx(score) if score is not None else None)


GAUDI = "v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3"


def test_scaling_json_multiplies_the_score(copy_of):
    folder = copy_of(GAUDI)
    (folder / "scaling.json").write_text(json.dumps({"scaling_factor": 1.25}))
    (entry,) = review_path(folder)
    assert entry.score_minutes == pytest.approx(153.581333 * 1.25, abs=1e-6) and entry.scaling_factor == 1.25
    assert any("scaling.json" in reason for reason in entry.reasons)


@pytest.mark.parametrize("content", ["{not json", "[1.5]", '{"scaling_factor": "x"}', '{"scaling_factor": -1}'])
def test_a_bad_scaling_json_is_a_clear_error(copy_of, content):
    folder = copy_of(GAUDI)
    (folder / "scaling.json").write_text(content)
    with pytest.raises(DataError, match="scaling.json.*fix or remove the file"):
        review_path(folder)
