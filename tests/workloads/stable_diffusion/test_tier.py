"""sd-tiny end to end through `trainclock run`, on the tier's captioned Fashion-MNIST items in the real
data home (where `trainclock data prepare` caches them with the tiny evaluators): the loss falls, FID
and CLIP are logged as the v3.1 stable_diffusion logs do (a line per metric, step_num in optimizer
steps), the log passes the official common rules and trainclock's review reads it back, 2 processes
train the same curve as 1, a run killed with -9 resumes, and bad input is one line."""

from __future__ import annotations

import numpy as np
import pytest

from tests.official_checker import check
from tests.workloads.helpers import (error_line, kill_at_first_checkpoint, log_path, losses, prepare_data, records,
                                     trainclock)
from trainclock.mllog.reader import read_events
from trainclock.workloads.stable_diffusion.metric import CLIP, FID
from trainclock.workloads.stable_diffusion.spec import get_member

MEMBER = "sd-tiny"


@pytest.fixture(scope="module")
def prepared():
    return prepare_data(MEMBER)  # untimed: images, captions, tiny CLIP and FID network, cached


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp(MEMBER)
    # seed 11: not one of the reference seeds the target was measured on
    return out, trainclock("run", MEMBER, "--seed", "11", "--out", str(out), "--no-progress")


@pytest.mark.slow
def test_sd_tiny_reaches_both_targets_at_one_evaluation(tiny_run):
    out, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout and "images/s" in proc.stdout
    steps = losses(out, MEMBER)
    evals = [r["eval"] for r in records(out, MEMBER) if "eval" in r]
    assert np.mean(steps[-5:]) < np.mean(steps[:5])
    assert len(evals) >= 1 and all(set(e) == {"FID", "CLIP"} for e in evals)
    spec = get_member(MEMBER)
    assert evals[-1]["FID"] <= spec.targets[FID] and evals[-1]["CLIP"] >= spec.targets[CLIP]
    assert all(spec.targets[FID] < e["FID"] or e["CLIP"] < spec.targets[CLIP] for e in evals[:-1])  # stopped at the first


@pytest.mark.slow
def test_sd_tiny_log_writes_a_line_per_metric_in_steps_and_passes_the_common_rules(tiny_run):
    from trainclock.review.run_review import review_log

    out, _ = tiny_run
    log = log_path(out, MEMBER)
    assert check(log) == []
    events, problems = read_events(log)
    assert not problems
    header = {e.key: e.value for e in events}
    assert header["submission_benchmark"] == "stable_diffusion" and header["opt_name"] == "adamw"
    spec = get_member(MEMBER)
    lines = [e for e in events if e.key == "eval_accuracy"]
    assert [e.metadata["metric"] for e in lines[:2]] == ["FID", "CLIP"]
    assert lines[0].metadata["step_num"] == spec.eval_every_samples // spec.global_batch_size
    review = review_log(log, "3.1")
    assert review.metrics and {m.name for m in review.metrics} == {"FID", "CLIP"}


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    common = ("--seed", "4", "--max-samples", "64", "--precision", "fp32", "--no-progress")
    one = trainclock("run", MEMBER, "--out", str(tmp_path / "one"), *common)
    two = trainclock("run", MEMBER, "--out", str(tmp_path / "two"), "--nproc", "2", *common)
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stdout[-2000:] + two.stderr[-3000:]
    assert len(losses(tmp_path / "one", MEMBER)) == 4
    assert losses(tmp_path / "two", MEMBER) == pytest.approx(losses(tmp_path / "one", MEMBER), rel=1e-4, abs=1e-5)
    first = [r["eval"] for r in records(tmp_path / "one", MEMBER) if "eval" in r]
    second = [r["eval"] for r in records(tmp_path / "two", MEMBER) if "eval" in r]
    assert second[0]["CLIP"] == pytest.approx(first[0]["CLIP"], abs=1e-3)
    assert second[0]["FID"] == pytest.approx(first[0]["FID"], rel=1e-3)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    run = ("--no-progress", "--checkpoint-every", "2", "--max-samples", "64")
    kill_at_first_checkpoint(tmp_path, MEMBER, *run)
    resumed = trainclock("run", MEMBER, "--out", str(tmp_path), *run, "--resume")
    assert resumed.returncode in (0, 1), resumed.stdout[-2000:] + resumed.stderr[-3000:]
    events, _ = read_events(log_path(tmp_path, MEMBER))
    assert [e.key for e in events].count("seed") == 1 and any(e.key == "trainclock_resumed" for e in events)
    assert [e.key for e in events].count("run_stop") == 1
    assert max(r["samples"] for r in records(tmp_path, MEMBER)) == 64


def test_bad_input_is_one_line(cli, tmp_path):
    assert "--data FOLDER" in error_line(cli("run", "stable_diffusion", "--out", tmp_path, "--no-progress"))
    assert "--tp/--pp" in error_line(cli("run", MEMBER, "--tp", "2", "--nproc", "2", "--out", tmp_path, "--no-progress"))
