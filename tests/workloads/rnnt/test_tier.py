"""rnnt-tiny end to end through `trainclock run`, on the tier's espeak-ng speech in the real data
home (where `trainclock data prepare` caches it): it reaches its WER target, its log passes the
official common rules and counts epochs as the rnnt logs do, 2 processes train the same curve as 1,
a run killed with -9 resumes, the planner predicts it, and bad input is one line."""

from __future__ import annotations

import numpy as np
import pytest

from tests.official_checker import check
from tests.workloads.helpers import (ROOT, error_line, kill_at_first_checkpoint, log_path, losses, prepare_data,
                                     records, trainclock)
from trainclock.mllog.reader import read_events
from trainclock.workloads.rnnt.metric import METRIC
from trainclock.workloads.rnnt.spec import get_member

MEMBER = "rnnt-tiny"


@pytest.fixture(scope="module")
def prepared():
    return prepare_data(MEMBER)  # untimed: espeak-ng speech as LibriSpeech FLAC, cached


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp(MEMBER)
    return out, trainclock("run", MEMBER, "--seed", "11", "--out", str(out), "--no-progress")


@pytest.mark.slow
def test_rnnt_tiny_reaches_its_wer_target(tiny_run):
    out, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout
    steps = [r["loss"] for r in records(out, MEMBER) if "loss" in r]
    evals = [r["eval"]["WER"] for r in records(out, MEMBER) if "eval" in r]
    target = get_member(MEMBER).targets[METRIC]
    assert np.mean(steps[-10:]) < np.mean(steps[:10])
    assert evals[-1] <= target and all(e > target for e in evals[:-1])


@pytest.mark.slow
def test_rnnt_tiny_log_passes_the_official_common_rules_and_counts_epochs(tiny_run):
    out, _ = tiny_run
    log = log_path(out, MEMBER)
    assert check(log) == []
    events, problems = read_events(log)
    assert not problems
    header = {e.key: e.value for e in events}
    assert header["submission_benchmark"] == "rnnt" and header["submission_division"] == "open"
    assert header["opt_name"] == "lamb" and header["eval_max_prediction_symbols"] == 300
    spec = get_member(MEMBER)
    assert header["eval_samples"] == spec.eval_utterances and header["train_samples"] == spec.train_utterances
    first = next(e for e in events if e.key == "eval_accuracy")
    assert first.metadata["epoch_num"] == pytest.approx(spec.eval_every_epochs)  # epochs, as the rnnt logs


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    common = ("--seed", "4", "--max-samples", "64", "--precision", "fp32", "--no-progress")
    one = trainclock("run", MEMBER, "--out", str(tmp_path / "one"), *common)
    two = trainclock("run", MEMBER, "--out", str(tmp_path / "two"), "--nproc", "2", *common)
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stdout[-2000:] + two.stderr[-3000:]
    curve = lambda out: losses(out, MEMBER)  # noqa: E731
    wer = lambda out: [r["eval"]["WER"] for r in records(out, MEMBER) if "eval" in r]  # noqa: E731
    assert len(curve(tmp_path / "one")) == 4
    assert curve(tmp_path / "two") == pytest.approx(curve(tmp_path / "one"), rel=1e-4, abs=1e-5)
    assert wer(tmp_path / "two") == pytest.approx(wer(tmp_path / "one"), abs=0.02)  # over the whole set in both


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    run = ("--no-progress", "--checkpoint-every", "4", "--max-samples", "192")
    kill_at_first_checkpoint(tmp_path, MEMBER, *run)
    resumed = trainclock("run", MEMBER, "--out", str(tmp_path), *run, "--resume")
    assert resumed.returncode in (0, 1), resumed.stdout[-2000:] + resumed.stderr[-3000:]
    log = log_path(tmp_path, MEMBER)
    events, _ = read_events(log)
    assert [e.key for e in events].count("seed") == 1 and any(e.key == "trainclock_resumed" for e in events)
    assert [e.key for e in events].count("run_stop") == 1
    assert max(r["samples"] for r in records(tmp_path, MEMBER)) == 192


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
    from trainclock.distributed.layout import Layout
    from trainclock.errors import UsageError
    from trainclock.workloads.rnnt import WORKLOAD

    for layout in (Layout(dp=1, tp=2), Layout(dp=1, pp=2), Layout(dp=2, fsdp=True)):
        with pytest.raises(UsageError, match="data parallel|DDP"):
            WORKLOAD.check_layout(WORKLOAD.specs.member(MEMBER), layout)
