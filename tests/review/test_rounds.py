"""Rounds as data: every round 3.0 to 6.1 read from the installed mlperf_logging, and the facts
read from its code agree with what that code does on real logs."""

from __future__ import annotations

import logging

import pytest
from mlperf_logging.benchmark_meta import get_allowed_benchmarks, get_result_file_counts
from mlperf_logging.rcp_checker import rcp_checker

from trainclock.review.log_summary import LogSummary
from trainclock.review.rounds import all_rounds
from trainclock.review.run_review import rcp_point, review_log
from trainclock.review.scoring import LAST_EVAL, scoring_rule, supported_rounds

ROUNDS = ["3.0", "3.1", "4.0", "4.1", "5.0", "5.1", "6.0", "6.1"]


def test_every_round_from_3_0_to_6_1_with_its_benchmarks_and_runs():
    assert supported_rounds() == ROUNDS
    for name, found in all_rounds().items():
        assert list(found.benchmarks) == list(dict.fromkeys(get_allowed_benchmarks("training", name)))
        assert set(found.rules) == set(found.benchmarks), name  # every benchmark of every round has rules
        for benchmark, rule in found.rules.items():
            assert rule.round == name and rule.runs == get_result_file_counts("training")[benchmark]
            assert rule.runs == rcp_checker.submission_runs["training"][benchmark]
            assert rule.drop == rule.not_converged == (4 if benchmark == "unet3d" else 1)
            assert found.quality_target(benchmark), (name, benchmark)  # the closed rules' ATLEAST_ONE_CHECK


@pytest.mark.parametrize("benchmark, round_, key, decimals, unit", [
    ("gpt3", "4.0", "epoch_num", 3, "tokens"),
    ("gnn", "4.1", "epoch_num", 3, "epochs"),
    ("rgat", "5.0", "epoch_num", 3, "epochs"),
    ("llama2_70b_lora", "4.0", "samples_count", None, "samples"),
    ("llama31_405b", "5.1", "samples_count", None, "samples"),
    ("flux1", "5.1", "samples_count", None, "samples"),
    ("stable_diffusion", "3.1", "step_num", None, "steps"),
    ("stable_diffusion", "4.0", "samples_count", None, "samples"),
])
def test_how_each_benchmark_reads_its_convergence_point(benchmark, round_, key, decimals, unit):
    rule = scoring_rule(benchmark, round_)
    assert (rule.rcp_key, rule.rcp_decimals, rule.progress) == (key, decimals, unit)


def test_the_rcp_slack_of_llama31_405b_and_rules_a_round_lacks():
    assert scoring_rule("llama31_405b", "5.0").rcp_slack == 46080 and scoring_rule("gpt3", "4.0").rcp_slack == 0
    assert scoring_rule("gnn", "3.1") is None and scoring_rule("gpt3", "5.0") is None
    assert scoring_rule("gnn", "9.9") is None and scoring_rule(None, "4.0") is None
    assert scoring_rule("llama2_70b_lora").round == "4.0"  # no round: the oldest that has it (runs never change)
    assert all_rounds()["3.0"].missing("stable_diffusion").startswith("round 3.0 has no benchmark 'stable_diffusion'")
    assert all_rounds()["4.0"].missing("gnn") is None


def test_the_convergence_point_is_the_one_rcp_checker_reads(later_rounds):
    """rcp_checker.read_submission_file, run on one log of each benchmark of the fixtures, reads the
    point trainclock reads: the facts taken from its code are the ones it acts on."""
    logging.disable(logging.CRITICAL)
    checked = set()
    try:
        for round_, tree in later_rounds.items():
            for log in sorted(tree.glob("*/results/*/*/result_*.txt")):
                benchmark = log.parent.name
                if (round_, benchmark) in checked:
                    continue
                checked.add((round_, benchmark))
                _, theirs, _, _ = rcp_checker.read_submission_file(str(log), f"{round_}.0", False)
                run = review_log(log, round_)
                ours = run.rcp_point
                assert (1e9 if ours is None else ours) == theirs, (round_, benchmark, log)
    finally:
        logging.disable(logging.NOTSET)
    assert {b for _, b in checked} >= {"gnn", "rgat", "llama2_70b_lora", "llama31_405b", "llama31_8b", "flux1",
                                       "stable_diffusion", "retinanet"}


def test_a_stable_diffusion_point_of_4_0_is_read_by_samples_count():
    summary = LogSummary()
    from trainclock.mllog.reader import Event

    def event(key, value, time_ms, **metadata):
        return Event(key, value, time_ms, "POINT_IN_TIME", metadata, time_ms)

    for e in [event("eval_accuracy", 80.0, 1, samples_count=512, step_num=1, metric="FID"),
              event("eval_accuracy", 0.2, 2, samples_count=512, step_num=1, metric="CLIP"),
              event("run_stop", None, 3, status="success")]:
        summary.observe(e)
    reading = summary.rcp_reading()
    assert rcp_point(reading, scoring_rule("stable_diffusion", "4.0")) == 512.0
    assert rcp_point(reading, scoring_rule("stable_diffusion", "3.1")) == 1.0
    assert scoring_rule("stable_diffusion", "4.0").rcp_progress != LAST_EVAL
