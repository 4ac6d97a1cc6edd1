"""retinanet-tiny end to end through `trainclock run`, on mosaics written in the OpenImages-MLPerf
layout in the real data home (`trainclock data prepare` caches them): it reaches its mAP target,
its log passes the official common rules and counts epochs as the ssd logs do, 2 processes train
the same curve as 1, a run killed with -9 resumes, bad input is one line, and the planner
predicts both full sizes' time-to-train from their cost models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.official_checker import check
from trainclock.mllog.reader import read_events
from trainclock.workloads.detection.spec import get_member

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("TRAINCLOCK_HOME", None)  # the real data home: the tier's mosaics are cached there
    return env


def trainclock(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainclock.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=_env(), cwd=ROOT)


def run_args(out: Path, *extra: str, member: str = "retinanet-tiny") -> list[str]:
    return ["run", member, "--out", str(out), "--no-progress", "--precision", "fp32", *extra]


def records(out: Path, member: str = "retinanet-tiny") -> list[dict]:
    metrics = next(out.glob(f"results/*/{member}/result_0.metrics.jsonl"))
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def log_path(out: Path, member: str = "retinanet-tiny") -> Path:
    return next(out.glob(f"results/*/{member}/result_0.txt"))


@pytest.fixture(scope="module")
def prepared():
    done = trainclock("data", "prepare", "retinanet-tiny")  # untimed: the mosaics, cached
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2,000 train and 200 val images in 10 classes" in done.stdout
    return done.stdout


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp("retinanet-tiny")
    return out, trainclock(*run_args(out, "--seed", "11"))


@pytest.mark.slow
def test_retinanet_tiny_reaches_its_map_target(tiny_run):
    out, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout and "images/s" in proc.stdout
    steps = [r for r in records(out) if "loss" in r]
    evals = [r["eval"]["mAP"] for r in records(out) if "eval" in r]
    target = get_member("retinanet-tiny", "ssd").targets["mAP"]
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.3
    assert evals[-1] >= target and all(e < target for e in evals[:-1])


@pytest.mark.slow
def test_retinanet_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = log_path(out)
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
    common = ("--seed", "4", "--max-samples", "64", "--micro-batch", "8")
    one = trainclock(*run_args(tmp_path / "one", *common))
    two = trainclock(*run_args(tmp_path / "two", "--nproc", "2", *common))
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stderr[-3000:]
    curve = lambda out: [r["loss"] for r in records(out) if "loss" in r]  # noqa: E731
    assert len(curve(tmp_path / "one")) == 4
    assert curve(tmp_path / "two") == pytest.approx(curve(tmp_path / "one"), rel=1e-4, abs=1e-5)
    # the whole validation set is scored from both ranks' gathered detections
    maps = lambda out: [r["eval"]["mAP"] for r in records(out) if "eval" in r]  # noqa: E731
    assert maps(tmp_path / "two") == pytest.approx(maps(tmp_path / "one"), abs=0.02)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    args = run_args(tmp_path, "--seed", "8", "--checkpoint-every", "4", "--max-samples", "256")
    victim = subprocess.Popen([sys.executable, "-m", "trainclock.cli", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("checkpoints/*/retinanet-tiny/result_0/step_*")):
        assert time.monotonic() < deadline and victim.poll() is None, "no checkpoint was written"
        time.sleep(0.02)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    resumed = trainclock(*args, "--resume")
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]
    events, _ = read_events(log_path(tmp_path))
    assert [e.key for e in events].count("seed") == 1 and any(e.key == "trainclock_resumed" for e in events)
    steps = [r["step"] for r in records(tmp_path) if "loss" in r]
    assert steps == list(range(len(steps))) and len(steps) == 256 // 16


def test_bad_input_is_one_line(tmp_path):
    proc = trainclock("run", "ssd", "--out", str(tmp_path), "--no-progress")
    assert proc.returncode == 2 and "--data FOLDER" in proc.stderr and "Traceback" not in proc.stderr
    proc = trainclock("run", "retinanet-tiny", "--out", str(tmp_path), "--no-progress", "--gbs", "15",
                      "--micro-batch", "4")
    assert proc.returncode == 2 and "divide the global batch size" in proc.stderr and "Traceback" not in proc.stderr


def test_planner_predicts_both_full_sizes_from_their_cost_models():
    for key, member in (("ssd", "retinanet-resnext50"), ("maskrcnn", "maskrcnn-r50")):
        proc = trainclock("plan", key, "--accelerator", "h100-sxm", "--count", "8")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"{member} on 8 x h100-sxm" in proc.stdout and "epochs to target" in proc.stdout
        assert "MLPerf RCPs" in proc.stdout and "tp=1,pp=1,dp=8" in proc.stdout


@pytest.mark.slow
def test_maskrcnn_tiny_logs_box_and_mask_map_as_one_dict(tmp_path):
    assert trainclock("data", "prepare", "maskrcnn-tiny").returncode == 0  # untimed: COCO-layout mosaics, cached
    proc = trainclock(*run_args(tmp_path, "--seed", "2", "--max-samples", "32", member="maskrcnn-tiny"))
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-3000:]
    log = log_path(tmp_path, "maskrcnn-tiny")
    assert check(log) == []
    events, _ = read_events(log)
    accuracy = next(e for e in events if e.key == "eval_accuracy")
    assert set(accuracy.value) == {"BBOX", "SEGM"} and accuracy.metadata["epoch_num"] == pytest.approx(32 / 2000)
    assert next(e.value for e in events if e.key == "submission_benchmark") == "maskrcnn"
