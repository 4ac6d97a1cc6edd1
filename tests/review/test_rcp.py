"""The reference convergence point check, and its statistics against mlperf_logging's rcp_checker."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import scipy.stats
from mlperf_logging.rcp_checker import rcp_checker

from trainclock.review.rcp import check_convergence, default_rcp_dir
from trainclock.review.rcp_stats import References, student_t_cdf
from trainclock.review.scoring import scoring_rule

RCP_FILES = sorted(default_rcp_dir().glob("training_3.[01].0/rcps_*.json"))


def test_student_t_cdf_matches_scipy():
    for df in range(1, 41):
        for t in (-30.0, -4.0, -2.1, -1.0, -0.3, 0.0, 0.5, 1.7, 3.0, 12.0):
            assert student_t_cdf(t, df) == pytest.approx(scipy.stats.t.cdf(t, df), abs=1e-13), (t, df)


@pytest.mark.parametrize("path", RCP_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_statistics_match_rcp_checker(path):
    benchmark = path.stem[len("rcps_"):]
    round_ = path.parent.name[len("training_"):]
    official = rcp_checker.RCP_Checker("training", round_, benchmark, False)
    rule = scoring_rule(benchmark)
    ours = References(json.loads(path.read_text()), rule.runs, rule.drop)
    assert [r.name for r in ours.pruned] == list(official.pruned_rcp_data)
    for ref in ours.all:
        record = official.rcp_data[ref.name]
        assert ref.mean == pytest.approx(record["RCP Mean"], rel=1e-12)
        assert ref.stdev == pytest.approx(record["RCP Stdev"], rel=1e-9)
        assert ref.min_epochs == pytest.approx(record["Min Epochs"], rel=1e-9)
    for low, high in itertools.pairwise(ours.pruned):
        between = (low.batch_size + high.batch_size) // 2
        _, interpolated = official._create_interp_rcp(between, official.rcp_data[low.name], official.rcp_data[high.name])
        ref = ours.interpolated(between, low, high)
        assert ref.mean == pytest.approx(interpolated["RCP Mean"], rel=1e-12)
        assert ref.min_mean == pytest.approx(interpolated["RCP Mean"] / interpolated["Max Speedup"], rel=1e-9)


GPT3 = scoring_rule("gpt3")


@pytest.mark.parametrize("tokens, status", [
    ([1.21e9, 1.20e9, 1.26e9], "pass"),
    ([1.05e9, 1.06e9, 1.07e9], "fail"),  # faster than any reference run: suspicious
    ([1.05e9, None, 1.07e9], "fail"),  # the failed run is the slowest, dropped
    # more non-converged runs than allowed: rcp_checker's "Insufficient convergence", a failure
    ([None, None, 1.2e9], "fail"),
])
def test_the_olympic_mean_of_convergence_is_compared_with_the_references(tokens, status):
    check = check_convergence(GPT3, "3.1", [2048] * 3, tokens)
    assert check.status == status and check.binding
    assert check.official == {"pass": "Pass", "fail": "Fail"}[status] or check.official_message == "Insufficient convergence"
    if status == "fail" and check.official != "Unknown state":
        assert check.submission_mean < check.min_mean and check.normalization > 1
        assert "faster than the references allow" in check.message


def test_no_reference_above_the_largest_batch_size_is_missing():
    check = check_convergence(GPT3, "3.1", [16384] * 3, [2.0e9] * 3)
    assert check.status == "missing" and "8192" in check.message


def test_runs_must_agree_on_the_batch_size():
    assert check_convergence(GPT3, "3.1", [2048, 2048, 4096], [1.2e9] * 3).status == "fail"


def test_too_few_runs_give_a_hint_not_a_verdict(shared_entries):
    bert = shared_entries["v3.1/NVIDIA/eos_ngc23.04_pytorch/bert"]
    assert bert.rcp.status == "fail" and not bert.rcp.binding  # one run, faster than ten would need to be
    assert bert.verdict == "incomplete" and bert.ok


def test_a_bad_rcp_folder_is_a_clear_error(tmp_path):
    from trainclock.errors import DataError

    (tmp_path / "training_3.1.0").mkdir()
    (tmp_path / "training_3.1.0" / "rcps_gpt3.json").write_text("{broken")
    with pytest.raises(DataError, match="rcps_gpt3.json are not in MLCommons' rcps_\\*.json format"):
        check_convergence(GPT3, "3.1", [2048] * 3, [1.2e9] * 3, tmp_path)
    assert check_convergence(scoring_rule("bert"), "3.1", [512] * 10, [1.0] * 10, tmp_path).status == "n/a"
    assert not math.isnan(check_convergence(GPT3, "3.0", [2048] * 3, [1.2e9] * 3).min_mean)
