"""retinanet-tiny end to end through `trainclock run`, on mosaics written in the OpenImages-MLPerf
layout in the real data home (`trainclock data prepare` caches them): it reaches its mAP target,
its log passes the official common rules and counts epochs as the ssd logs do, 2 processes train
the same curve as 1, a run killed with -9 resumes, bad input is one line, and the planner
predicts both full sizes' time-to-train from their cost models. Only the first run trains the
whole tier; the others stop after a few steps (--max-samples), which is all they check.
Mask R-CNN's log (the BBOX/SEGM dict) is checked by detection/test_closed_log.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.official_checker import check
from tests.workloads.helpers import (evaluations, kill_at_first_checkpoint, log_path, losses, prepare_data, records,
                                     trainclock)
from trainclock import cli
from trainclock.mllog.reader import read_events
from trainclock.workloads.detection.spec import get_member

MEMBER = "retinanet-tiny"


def run_args(out: Path, *extra: str) -> list[str]:
    return ["run", MEMBER, "--out", str(out), "--no-progress", "--precision", "fp32", *extra]


@pytest.fixture(scope="module")
def prepared():
    done = prepare_data(MEMBER)  # untimed: the mosaics, cached
    assert "2,000 train and 200 val images in 10 classes" in done
    return done


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp(MEMBER)
    return out, trainclock(*run_args(out, "--seed", "11"))


@pytest.mark.slow
def test_retinanet_tiny_reaches_its_map_target(tiny_run):
    out, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout and "images/s" in proc.stdout
    steps = losses(out, MEMBER)
    evals = evaluations(out, MEMBER, "mAP")
    target = get_member(MEMBER, "ssd").targets["mAP"]
    assert steps[-1] < steps[0] - 0.3
    assert evals[-1] >= target and all(e < target for e in evals[:-1])


@pytest.mark.slow
def test_retinanet_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = log_path(out, MEMBER)
    assert check(log) == []
    events, problems = read_events(log)
    assert not problems
    header = {e.key: e.value for e in events}
    assert header["submission_benchmark"] == "ssd" and header["submission_division"] == "open"
    assert header["opt_name"] == "adam" and header["opt_weight_decay"] == 0
    assert header["eval_samples"] == 200 and header["train_samples"] == 2000
    first = next(e for e in events if e.key == "eval_accuracy")
    assert first.metadata["epoch_num"] == pytest.approx(1600 / 2000)  # epochs, as ssd logs


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    # micro-batches of 8 on both: the same batch-norm groups
    common = ("--seed", "4", "--max-samples", "32", "--micro-batch", "8")
    one = trainclock(*run_args(tmp_path / "one", *common))
    two = trainclock(*run_args(tmp_path / "two", "--nproc", "2", *common))
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stderr[-3000:]
    assert len(losses(tmp_path / "one", MEMBER)) == 2
    assert losses(tmp_path / "two", MEMBER) == pytest.approx(losses(tmp_path / "one", MEMBER), rel=1e-4, abs=1e-5)
    # the whole validation set is scored from both ranks' gathered detections
    maps = lambda out: evaluations(out, MEMBER, "mAP")  # noqa: E731
    assert maps(tmp_path / "two") == pytest.approx(maps(tmp_path / "one"), abs=0.02)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    args = run_args(tmp_path, "--seed", "8", "--checkpoint-every", "2", "--max-samples", "96")
    kill_at_first_checkpoint(tmp_path, MEMBER, *args[4:])  # after run MEMBER --out OUT
    resumed = trainclock(*args, "--resume")
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]
    events, _ = read_events(log_path(tmp_path, MEMBER))
    assert [e.key for e in events].count("seed") == 1 and any(e.key == "trainclock_resumed" for e in events)
    steps = [r["step"] for r in records(tmp_path, MEMBER) if "loss" in r]
    assert steps == list(range(len(steps))) and len(steps) == 96 // 16


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
    proc = trainclock("run", member, "--out", str(tmp_path), "--no-progress", "--seed", "1")
    assert proc.returncode == 0 and "run success" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    targets = get_member(member, "maskrcnn").targets
    evals = [r["eval"] for r in records(tmp_path, member) if "eval" in r]
    assert all(evals[-1][m] >= t for m, t in targets.items())
    assert not any(all(e[m] >= t for m, t in targets.items()) for e in evals[:-1])
    assert check(log_path(tmp_path, member)) == []
