"""rnnt-tiny end to end through `trainclock run`, on the tier's espeak-ng speech in the real data
home (where `trainclock data prepare` caches it): it reaches its WER target, its log passes the
official common rules and counts epochs as the rnnt logs do, 2 processes train the same curve as 1,
a run killed with -9 resumes, the planner predicts it, and bad input is one line."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.workloads.helpers import (ROOT, assert_refuses_layouts_beyond_data_parallel,
                                     assert_resumes_to_its_sample_limit, assert_same_loss_curve,
                                     assert_tier_met_its_target, checked_open_log, error_line, evaluations, losses,
                                     one_and_two_processes, prepared_fixture, tier_run_fixture)
from trainclock.workloads.rnnt.metric import METRIC
from trainclock.workloads.rnnt.spec import get_member

MEMBER = "rnnt-tiny"

prepared = prepared_fixture(MEMBER)  # untimed: espeak-ng speech as LibriSpeech FLAC, cached
tiny_run = tier_run_fixture(MEMBER, "--seed", "11", "--no-progress")


@pytest.mark.slow
def test_rnnt_tiny_reaches_its_wer_target(tiny_run):
    out = assert_tier_met_its_target(tiny_run, MEMBER, "WER", get_member(MEMBER).targets[METRIC],
                                     higher_is_better=False)
    steps = losses(out, MEMBER)
    assert np.mean(steps[-10:]) < np.mean(steps[:10])


@pytest.mark.slow
def test_rnnt_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = checked_open_log(out, MEMBER, "rnnt")
    header = log.header
    assert header["opt_name"] == "lamb" and header["eval_max_prediction_symbols"] == 300
    spec = get_member(MEMBER)
    assert header["eval_samples"] == spec.eval_utterances and header["train_samples"] == spec.train_utterances
    first = log.first("eval_accuracy")
    # epochs, as the rnnt logs: at the first step boundary at or past the interval (600 of 1,200 is 37.5 steps)
    first_step_boundary = math.ceil(spec.eval_every_samples / spec.global_batch_size) * spec.global_batch_size
    assert first.metadata["epoch_num"] == pytest.approx(first_step_boundary / spec.train_utterances)


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    one, two = one_and_two_processes(MEMBER, tmp_path, "--seed", "4", "--max-samples", "64", "--precision", "fp32",
                                     "--no-progress")
    assert_same_loss_curve(MEMBER, one, two, steps=4)
    wer = lambda out: evaluations(out, MEMBER, "WER")  # noqa: E731
    assert wer(two) == pytest.approx(wer(one), abs=0.02)  # over the whole set in both


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    assert_resumes_to_its_sample_limit(tmp_path, MEMBER, checkpoint_every=4, max_samples=192)


def test_planner_predicts_the_full_size_from_the_rules_convergence_points(cli):
    code, out, err = cli("plan", "rnnt", "--accelerator", "h100-sxm", "--count", "8")
    assert code == 0, out[-2000:] + err[-2000:]
    assert "rnnt-librispeech" in out and "time-to-train" in out


def test_cost_model_describes_the_network_in_the_planners_terms():
    from trainclock.workloads.rnnt.cost import cost_model

    full = cost_model("rnnt-librispeech")
    assert full.parameter_count == 49_006_080 and (full.layers, full.tensor_parallel_units) == (1, 1)
    assert full.flops_per_sample.total > 6 * 49_006_080 * 12.3 * 100 / 3 / 2 * 0.5  # every weight, per frame
    points = full.convergence(lambda: ROOT / "no-such-folder").points  # the rules package's RCPs
    assert dict(points)[1024] == pytest.approx(44.6) and full.eval_samples == 2703
    assert full.units_per_sample == pytest.approx(1 / 281_241)


def test_bad_input_is_one_line(cli, tmp_path):
    assert "--data FOLDER" in error_line(cli("run", "rnnt", "--out", tmp_path, "--no-progress"))
    (tmp_path / "ls" / "dev-clean").mkdir(parents=True)
    refused = cli("run", MEMBER, "--data", tmp_path / "ls", "--out", tmp_path, "--no-progress")
    assert "needs dev-clean and at least one of" in error_line(refused)


def test_layouts_the_network_cannot_take_are_refused():
    from trainclock.workloads.rnnt import WORKLOAD

    assert_refuses_layouts_beyond_data_parallel(WORKLOAD, MEMBER)
