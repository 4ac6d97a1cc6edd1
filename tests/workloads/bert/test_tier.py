"""bert-tiny end to end through `trainclock run`, on the default corpus in the real data home (where
`trainclock data fetch` installs it and the tier's data and phase-1 checkpoint are then cached):
it reaches its masked-LM accuracy target, its log passes the official common rules and counts
samples as the bert logs do, 2 processes train the same curve as 1, and bad input is one line."""

from __future__ import annotations

import pytest

from tests.workloads.helpers import (ROOT, assert_same_loss_curve, assert_tier_met_its_target, checked_open_log,
                                     error_line, evaluations, kill_then_resume, one_and_two_processes, prepared_fixture,
                                     step_records, tier_run_fixture, trainclock)
from trainclock.workloads.bert.metric import METRIC
from trainclock.workloads.bert.spec import get_member

MEMBER = "bert-tiny"

prepared = prepared_fixture(MEMBER, fetch=True)  # untimed: data and the phase-1 checkpoint, cached
tiny_run = tier_run_fixture(MEMBER, "--seed", "11", "--no-progress")


@pytest.mark.slow
def test_bert_tiny_reaches_its_target_from_the_phase1_checkpoint(tiny_run):
    out = assert_tier_met_its_target(tiny_run, MEMBER, "masked-LM accuracy", get_member("bert-tiny").targets[METRIC])
    trained = step_records(out, MEMBER)
    assert trained[-1]["loss"] < trained[0]["loss"]


@pytest.mark.slow
def test_bert_tiny_log_passes_the_official_common_rules_and_counts_samples(tiny_run):
    out, _ = tiny_run
    log = checked_open_log(out, MEMBER, "bert")
    header = log.header
    assert header["opt_name"] == "lamb" and header["max_sequence_length"] == 128
    spec = get_member("bert-tiny")
    first = log.first("eval_accuracy")
    assert first.metadata["epoch_num"] == spec.eval_every_samples  # progress in samples, as the bert logs
    assert header["train_samples"] == step_records(out, MEMBER)[-1]["samples"]


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    one, two = one_and_two_processes(MEMBER, tmp_path, "--seed", "4", "--max-samples", "128", "--precision", "fp32",
                                     "--no-progress")
    assert_same_loss_curve(MEMBER, one, two, steps=4)
    accuracy = lambda out: evaluations(out, MEMBER, "masked-LM accuracy")  # noqa: E731
    assert accuracy(two) == pytest.approx(accuracy(one), abs=1e-9)


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
    kill_then_resume(tmp_path / "cut", MEMBER, *common)
    curve = lambda out: {r["step"]: r["loss"] for r in step_records(out, MEMBER)}  # noqa: E731
    whole_curve, cut_curve = curve(tmp_path / "whole"), curve(tmp_path / "cut")
    assert len(whole_curve) == 6 and set(cut_curve) == set(whole_curve)
    assert [cut_curve[s] for s in sorted(cut_curve)] == pytest.approx([whole_curve[s] for s in sorted(whole_curve)],
                                                                      rel=1e-6)
