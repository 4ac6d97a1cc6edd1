"""bert-tiny end to end through `trainclock run`, on the default corpus in the real data home (where
`trainclock data fetch` installs it and the tier's data and phase-1 checkpoint are then cached):
it reaches its masked-LM accuracy target, its log passes the official common rules and counts
samples as the bert logs do, 2 processes train the same curve as 1, and bad input is one line."""

from __future__ import annotations

import pytest

from tests.official_checker import check
from tests.workloads.helpers import (ROOT, error_line, kill_at_first_checkpoint, losses, prepare_data, records,
                                     trainclock)
from trainclock.mllog.reader import read_events
from trainclock.workloads.bert.metric import METRIC
from trainclock.workloads.bert.spec import get_member

MEMBER = "bert-tiny"


@pytest.fixture(scope="module")
def prepared():
    fetched = trainclock("data", "fetch")
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    return prepare_data(MEMBER)  # untimed: data and the phase-1 checkpoint, cached


@pytest.fixture(scope="module")
def tiny_run(prepared, tmp_path_factory):
    out = tmp_path_factory.mktemp("bert-tiny")
    return out, trainclock("run", "bert-tiny", "--seed", "11", "--out", str(out), "--no-progress")


@pytest.mark.slow
def test_bert_tiny_reaches_its_target_from_the_phase1_checkpoint(tiny_run):
    out, proc = tiny_run
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout
    steps = [r for r in records(out, MEMBER) if "loss" in r]
    evals = [r["eval"]["masked-LM accuracy"] for r in records(out, MEMBER) if "eval" in r]
    target = get_member("bert-tiny").targets[METRIC]
    assert steps[-1]["loss"] < steps[0]["loss"]
    assert evals[-1] >= target and all(e < target for e in evals[:-1])


@pytest.mark.slow
def test_bert_tiny_log_passes_the_official_common_rules_and_counts_samples(tiny_run):
    out, _ = tiny_run
    log = next(out.glob("results/*/bert-tiny/result_0.txt"))
    assert check(log) == []
    events, problems = read_events(log)
    assert not problems
    header = {e.key: e.value for e in events}
    assert header["submission_benchmark"] == "bert" and header["submission_division"] == "open"
    assert header["opt_name"] == "lamb" and header["max_sequence_length"] == 128
    spec = get_member("bert-tiny")
    first = next(e for e in events if e.key == "eval_accuracy")
    assert first.metadata["epoch_num"] == spec.eval_every_samples  # progress in samples, as the bert logs
    assert header["train_samples"] == [r for r in records(out, MEMBER) if "loss" in r][-1]["samples"]


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    common = ("--seed", "4", "--max-samples", "128", "--precision", "fp32", "--no-progress")
    one = trainclock("run", "bert-tiny", "--out", str(tmp_path / "one"), *common)
    two = trainclock("run", "bert-tiny", "--out", str(tmp_path / "two"), "--nproc", "2", *common)
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stderr[-3000:]
    curve = lambda out: losses(out, MEMBER)  # noqa: E731
    accuracy = lambda out: [r["eval"]["masked-LM accuracy"] for r in records(out, MEMBER) if "eval" in r]  # noqa: E731
    assert len(curve(tmp_path / "one")) == 4
    assert curve(tmp_path / "two") == pytest.approx(curve(tmp_path / "one"), rel=1e-4, abs=1e-5)
    assert accuracy(tmp_path / "two") == pytest.approx(accuracy(tmp_path / "one"), abs=1e-9)


def test_full_size_without_its_checkpoint_or_data_is_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCLOCK_BERT_INIT_CHECKPOINT", "")
    run = ("run", "bert", "--out", tmp_path, "--no-progress")
    assert "--init-checkpoint PATH" in error_line(cli(*run))
    assert "x.pt does not exist" in error_line(cli(*run, "--init-checkpoint", tmp_path / "x.pt"))
    (tmp_path / "x.pt").write_bytes(b"")
    assert "--data FOLDER" in error_line(cli(*run, "--init-checkpoint", tmp_path / "x.pt"))


def test_the_planner_predicts_bert_from_its_cost_model(cli):
    code, out, err = cli("plan", "bert", "--accelerator", "h100-sxm", "--count", "8", "--layout", "tp=1,pp=1,mb=8")
    assert code == 0, err[-2000:]
    assert "bert-large on 8 x h100-sxm" in out and "(MLPerf RCPs training_3.1.0)" in out
    from trainclock.workloads.bert.cost import cost_model

    large = cost_model("bert-large")
    assert large.parameter_count == 336_226_108  # BertForPreTraining's own count, as test_model checks
    assert large.layers * large.layer_parameters + large.other_parameters == pytest.approx(large.parameter_count)
    flops = large.flops_per_sample
    assert flops.other / flops.total == pytest.approx(512 / (512 + 6 * 1024), rel=0.05)  # 4sh of 24h^2 + 4sh
    mini = cost_model("bert-mini").convergence(lambda: ROOT)
    assert mini is not None and mini.points[0][1] > 0


@pytest.mark.slow
def test_resume_after_kill_9_trains_the_same_curve(prepared, tmp_path):
    common = ("--seed", "5", "--max-samples", "192", "--precision", "fp32", "--no-progress", "--checkpoint-every", "2")
    whole = trainclock("run", "bert-tiny", "--out", str(tmp_path / "whole"), *common)
    assert whole.returncode in (0, 1), whole.stderr[-3000:]
    kill_at_first_checkpoint(tmp_path / "cut", MEMBER, *common)
    resumed = trainclock("run", "bert-tiny", "--out", str(tmp_path / "cut"), *common, "--resume")
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]
    steps = lambda out: {r["step"]: r["loss"] for r in records(out, MEMBER) if "loss" in r}  # noqa: E731
    whole_curve, cut_curve = steps(tmp_path / "whole"), steps(tmp_path / "cut")
    assert len(whole_curve) == 6 and set(cut_curve) == set(whole_curve)
    assert [cut_curve[s] for s in sorted(cut_curve)] == pytest.approx([whole_curve[s] for s in sorted(whole_curve)],
                                                                      rel=1e-6)
