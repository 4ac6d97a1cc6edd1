"""resnet-tiny end to end through `trainclock run`, on Fashion-MNIST exported into the ImageNet
folder layout in the real data home (`trainclock data prepare` caches it): it reaches its top-1
target, its log passes the official common rules and counts epochs as the resnet logs do, 2
processes train the same curve as 1, a run killed with -9 resumes, bad input is one line, and the
planner predicts the full size's time-to-train from its cost model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.official_checker import check
from tests.workloads.helpers import (error_line, kill_at_first_checkpoint, log_path, losses, prepare_data, records,
                                     trainclock)
from tests.workloads.resnet.trees import truncate, write_tree
from trainclock.mllog.reader import read_events
from trainclock.workloads.resnet.metric import METRIC
from trainclock.workloads.resnet.spec import get_member

MEMBER = "resnet-tiny"


def run_args(out: Path, *extra: str) -> list[str]:
    return ["run", MEMBER, "--out", str(out), "--no-progress", "--precision", "fp32", *extra]


@pytest.fixture(scope="module")
def prepared():
    done = prepare_data(MEMBER)  # untimed: the JPEG export, cached
    assert "12,000 train and 1,000 val images in 10 classes" in done
    return done


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp("resnet-tiny")
    return out, trainclock(*run_args(out, "--seed", "11"))


@pytest.mark.slow
def test_resnet_tiny_reaches_its_top1_target(tiny_run):
    out, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout and "images/s" in proc.stdout
    steps = [r for r in records(out, MEMBER) if "loss" in r]
    evals = [r["eval"]["top-1 accuracy"] for r in records(out, MEMBER) if "eval" in r]
    target = get_member("resnet-tiny").targets[METRIC]
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.8
    assert evals[-1] >= target and all(e < target for e in evals[:-1])


@pytest.mark.slow
def test_resnet_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = log_path(out, MEMBER)
    assert check(log) == []
    events, problems = read_events(log)
    assert not problems
    header = {e.key: e.value for e in events}
    assert header["submission_benchmark"] == "resnet" and header["submission_division"] == "open"
    assert header["opt_name"] == "sgd" and header["sgd_opt_momentum"] == 0.9
    assert header["model_bn_span"] == 32 and header["dataset"] == "fashion-mnist"
    assert header["eval_samples"] == 1000
    spec = get_member("resnet-tiny")
    first = next(e for e in events if e.key == "eval_accuracy")
    assert first.metadata["epoch_num"] == pytest.approx(spec.eval_first_samples / 12_000)  # epochs, as resnet logs


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    common = ("--seed", "4", "--max-samples", "512")
    one = trainclock(*run_args(tmp_path / "one", *common))
    two = trainclock(*run_args(tmp_path / "two", "--nproc", "2", *common))
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stderr[-3000:]
    curve = lambda out: losses(out, MEMBER)  # noqa: E731
    accuracy = lambda out: [r["eval"]["top-1 accuracy"] for r in records(out, MEMBER) if "eval" in r]  # noqa: E731
    assert len(curve(tmp_path / "one")) == 8
    # the same images, crops and batch-norm groups (micro-batches of 32) on 1 or 2 processes
    assert curve(tmp_path / "two") == pytest.approx(curve(tmp_path / "one"), rel=1e-4, abs=1e-5)
    # batch-norm running statistics: 1 process updates them from both micro-batches of a step, DDP
    # keeps rank 0's; the eval uses them, so its accuracy (over the whole set on both) may differ a little
    assert accuracy(tmp_path / "two") == pytest.approx(accuracy(tmp_path / "one"), abs=0.05)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    args = run_args(tmp_path, "--seed", "8", "--checkpoint-every", "4", "--max-samples", "1536")
    kill_at_first_checkpoint(tmp_path, MEMBER, *args[4:])
    resumed = trainclock(*args, "--resume")
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]
    events, _ = read_events(log_path(tmp_path, MEMBER))
    assert [e.key for e in events].count("seed") == 1 and any(e.key == "trainclock_resumed" for e in events)
    steps = [r["step"] for r in records(tmp_path, MEMBER) if "loss" in r]
    assert steps == list(range(len(steps))) and len(steps) == 1536 // 64


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
