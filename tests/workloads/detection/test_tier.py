"""retinanet-tiny end to end through `trainclock run`, on mosaics written in the OpenImages-MLPerf
layout in the real data home (`trainclock data prepare` caches them): it reaches its mAP target,
its log passes the official common rules and counts epochs as the ssd logs do, 2 processes train
the same curve as 1, a run killed with -9 resumes, bad input is one line, and the planner
predicts both full sizes' time-to-train from their cost models. Only the first run trains the
whole tier; the others stop after a few steps (--max-samples), which is all they check.
Mask R-CNN's log (the BBOX/SEGM dict) is checked by detection/test_closed_log.py."""

from __future__ import annotations

import pytest

from tests.official_checker import check
from tests.workloads.helpers import (assert_resumes_each_step_once, assert_same_loss_curve, assert_succeeded,
                                     assert_tier_met_its_target, checked_open_log, evaluations, log_path, losses,
                                     one_and_two_processes, prepare_data, prepared_fixture, tier_run_fixture,
                                     trainclock)
from trainclock import cli
from trainclock.workloads.detection.spec import get_member

MEMBER = "retinanet-tiny"
FP32 = ("--no-progress", "--precision", "fp32")

prepared = prepared_fixture(MEMBER, "2,000 train and 200 val images in 10 classes")  # untimed: the mosaics, cached
tiny_run = tier_run_fixture(MEMBER, "--no-progress", "--seed", "11")  # the precision its evidence was measured in


@pytest.mark.slow
def test_retinanet_tiny_reaches_its_map_target(tiny_run):
    out = assert_tier_met_its_target(tiny_run, MEMBER, "mAP", get_member(MEMBER, "ssd").targets["mAP"],
                                     in_stdout=("images/s",))
    trained = losses(out, MEMBER)
    assert trained[-1] < trained[0] - 0.3


@pytest.mark.slow
def test_retinanet_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = checked_open_log(out, MEMBER, "ssd")
    header = log.header
    assert header["opt_name"] == "adam" and header["opt_weight_decay"] == 0
    assert header["opt_learning_rate_decay_steps"] == [600, 720]  # the tier's own decays, logged
    assert header["opt_learning_rate_warmup_epochs"] == 2.0
    assert header["eval_samples"] == 200 and header["train_samples"] == 2000
    first = log.first("eval_accuracy")
    assert first.metadata["epoch_num"] == pytest.approx(1280 / 2000)  # epochs, as ssd logs


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    # micro-batches of 8 on both: the same batch-norm groups
    one, two = one_and_two_processes(MEMBER, tmp_path, *FP32, "--seed", "4", "--max-samples", "32",
                                     "--micro-batch", "8")
    assert_same_loss_curve(MEMBER, one, two, steps=2)
    # the whole validation set is scored from both ranks' gathered detections
    maps = lambda out: evaluations(out, MEMBER, "mAP")  # noqa: E731
    assert maps(two) == pytest.approx(maps(one), abs=0.02)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    assert_resumes_each_step_once(tmp_path, MEMBER, *FP32, "--seed", "8", "--checkpoint-every", "2",
                                  "--max-samples", "96", steps=96 // 16)


def test_bad_input_is_one_line(tmp_path, capsys):
    assert cli.main(["run", "ssd", "--out", str(tmp_path), "--no-progress"]) == 2
    assert "--data FOLDER" in capsys.readouterr().err
    assert cli.main(["run", MEMBER, "--out", str(tmp_path), "--no-progress", "--gbs", "15", "--micro-batch", "4"]) == 2
    err = capsys.readouterr().err
    assert "divide the global batch size" in err and len(err.strip().splitlines()) == 1


def test_planner_predicts_both_full_sizes_from_their_cost_models(capsys):
    for key, member in (("ssd", "retinanet-resnext50"), ("maskrcnn", "maskrcnn-r50")):
        assert cli.main(["plan", key, "--accelerator", "h100-sxm", "--count", "8"]) == 0
        out = capsys.readouterr().out
        assert f"{member} on 8 x h100-sxm" in out and "epochs to target" in out
        assert "MLPerf RCPs" in out and "tp=1,pp=1,dp=8" in out


@pytest.mark.slow
def test_maskrcnn_tiny_reaches_both_targets_through_the_batched_heads(tmp_path):
    """Mask R-CNN's tier end to end: its BBOX and SEGM targets, met together, through the batched
    RPN and RoI heads (maskrcnn_heads.py); its log passes the official common rules."""
    member = "maskrcnn-tiny"
    prepare_data(member)
    assert_succeeded(trainclock("run", member, "--out", str(tmp_path), "--no-progress", "--seed", "1"))
    targets = get_member(member, "maskrcnn").targets
    evals = evaluations(tmp_path, member)
    assert all(evals[-1][m] >= t for m, t in targets.items())
    assert not any(all(e[m] >= t for m, t in targets.items()) for e in evals[:-1])
    assert check(log_path(tmp_path, member)) == []
