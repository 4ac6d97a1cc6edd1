"""resnet-tiny end to end through `trainclock run`, on Fashion-MNIST exported into the ImageNet
folder layout in the real data home (`trainclock data prepare` caches it): it reaches its top-1
target, its log passes the official common rules and counts epochs as the resnet logs do, 2
processes train the same curve as 1, a run killed with -9 resumes, bad input is one line, and the
planner predicts the full size's time-to-train from its cost model."""

from __future__ import annotations

import pytest

from tests.workloads.helpers import (assert_resumes_each_step_once, assert_same_loss_curve, assert_tier_met_its_target,
                                     checked_open_log, error_line, evaluations, one_and_two_processes, prepared_fixture,
                                     step_records, tier_run_fixture, trainclock)
from tests.workloads.resnet.trees import truncate, write_tree
from trainclock.workloads.resnet.metric import METRIC
from trainclock.workloads.resnet.spec import get_member

MEMBER = "resnet-tiny"
FP32 = ("--no-progress", "--precision", "fp32")

# untimed: the JPEG export, cached
prepared = prepared_fixture(MEMBER, "12,000 train and 2,000 val images in 10 classes")
tiny_run = tier_run_fixture(MEMBER, *FP32, "--seed", "11")


@pytest.mark.slow
def test_resnet_tiny_reaches_its_top1_target(tiny_run):
    out = assert_tier_met_its_target(tiny_run, MEMBER, "top-1 accuracy", get_member("resnet-tiny").targets[METRIC],
                                     in_stdout=("images/s",))
    trained = step_records(out, MEMBER)
    assert trained[-1]["loss"] < trained[0]["loss"] - 0.8


@pytest.mark.slow
def test_resnet_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = checked_open_log(out, MEMBER, "resnet")
    header = log.header
    assert header["opt_name"] == "sgd" and header["sgd_opt_momentum"] == 0.9
    assert header["model_bn_span"] == 32 and header["dataset"] == "fashion-mnist"
    assert header["eval_samples"] == 2000
    spec = get_member("resnet-tiny")
    first = log.first("eval_accuracy")
    assert first.metadata["epoch_num"] == pytest.approx(spec.eval_first_samples / 12_000)  # epochs, as resnet logs


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    one, two = one_and_two_processes(MEMBER, tmp_path, *FP32, "--seed", "4", "--max-samples", "512")
    # the same images, crops and batch-norm groups (micro-batches of 32) on 1 or 2 processes
    assert_same_loss_curve(MEMBER, one, two, steps=8)
    # batch-norm running statistics: 1 process updates them from both micro-batches of a step, DDP
    # keeps rank 0's; the eval uses them, so its accuracy (over the whole set on both) may differ a little
    accuracy = lambda out: evaluations(out, MEMBER, "top-1 accuracy")  # noqa: E731
    assert accuracy(two) == pytest.approx(accuracy(one), abs=0.05)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    assert_resumes_each_step_once(tmp_path, MEMBER, *FP32, "--seed", "8", "--checkpoint-every", "4",
                                  "--max-samples", "1536", steps=1536 // 64)


def test_bad_input_is_one_line(cli, tmp_path):
    run = ("run", "resnet", "--out", tmp_path, "--no-progress")
    assert "--data FOLDER" in error_line(cli(*run))
    assert "nope does not exist" in error_line(cli(*run, "--data", tmp_path / "nope"))
    (tmp_path / "empty" / "train").mkdir(parents=True)
    assert "no class folders" in error_line(cli(*run, "--data", tmp_path / "empty"))


@pytest.mark.slow
def test_a_truncated_jpeg_stops_the_run_with_one_line(tmp_path):
    root = write_tree(tmp_path / "images", classes=2, per_class=4, val_per_class=2)
    broken = next((root / "train").glob("*/*.JPEG"))
    truncate(broken)
    proc = trainclock("run", "resnet-tiny", "--out", str(tmp_path / "out"), "--no-progress", "--data", str(root),
                      "--gbs", "8", "--micro-batch", "8", "--loader-workers", "1")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"cannot decode image {broken}" in proc.stderr and "Traceback" not in proc.stderr


def test_planner_predicts_the_full_size_from_its_cost_model(cli):
    code, out, err = cli("plan", "resnet", "--accelerator", "h100-sxm", "--count", "8", "--gbs", "3264")
    assert code == 0, out[-2000:] + err[-2000:]
    assert "resnet-50 on 8 x h100-sxm" in out and "epochs to target" in out
    assert "MLPerf RCPs" in out and "tp=1,pp=1,dp=8" in out
    code, tier, err = cli("plan", "resnet-mini", "--accelerator", "h100-sxm", "--count", "1")
    assert code == 0, tier[-2000:] + err[-2000:]
