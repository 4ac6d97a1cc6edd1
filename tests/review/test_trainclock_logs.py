"""Logs written by trainclock's own runs: a good one passes its open-division GPT-3 rules and is
scored; each way of breaking one fails, naming the rule it breaks."""

from __future__ import annotations

import shutil

import pytest

from trainclock.review.entry import INVALID, VALID
from trainclock.review.run_review import review_log
from trainclock.review.tree import review_path

from trainclock.workloads.gpt3.spec import get_member

from .trainclock_logs import START_MS, SYSTEM, WORKLOAD, changed, edit_lines, target, without, write_log, write_tree

OPEN_GPT3 = "training_3.1.0/open_gpt3.yaml"
COMMON = "training_3.1.0/common.yaml"
HOUSE = "trainclock/common.yaml"


def test_a_trainclock_tree_passes_and_is_scored(trainclock_tree):
    (entry,) = review_path(trainclock_tree)
    assert entry.verdict == VALID and entry.ok and not entry.failed_runs
    assert entry.name == WORKLOAD and entry.benchmark == "gpt3" and entry.system == SYSTEM
    assert entry.score_minutes == pytest.approx(1.5)  # the olympic mean of 1.5, 1.2, 1.7
    assert entry.accelerators == 0 and entry.org == "trainclock" and entry.division == "open"
    assert entry.context.round == "3.1" and entry.context.round_source == "default"
    assert entry.rcp.status == "n/a"  # the open division has no reference convergence points
    for run in entry.runs:
        assert run.findings == () and run.workload == WORKLOAD
        every = get_member(WORKLOAD).eval_every_samples * 128  # tokens between evaluations
        assert run.converged_at == 2 * every and run.progress_unit == "tokens"  # the second evaluation
        assert [p.value for p in run.evals] == [target() + 1.0, target() - 0.1]


def test_the_log_is_read_from_its_header(trainclock_tree):
    run = review_log(next(trainclock_tree.glob("results/*/*/result_0.txt")), "3.1")
    assert run.header["trainclock_target"] == target() and run.header["max_sequence_length"] == 128
    assert run.time_to_train_ms == 90_000 and run.global_batch_size == 32


def one_run(tmp_path, **options):
    return write_log(tmp_path / "results" / SYSTEM / WORKLOAD / "result_0.txt", 1.0, **options)


def failures(path, round_="3.1"):
    run = review_log(path, round_)
    assert not run.passed
    return {(f.rule, f.key) for f in run.errors}


BROKEN = {
    "target never reached": (dict(evals=[target() + 1.0, target() + 0.5]), None, (OPEN_GPT3, "eval_accuracy")),
    "no target in the log": ({}, without("trainclock_target"), (OPEN_GPT3, "trainclock_target")),
    "no workload in the log": ({}, without("trainclock_workload"), (OPEN_GPT3, "trainclock_workload")),
    "evaluations without progress": ({}, changed("eval_accuracy", metadata={"file": "x"}), (OPEN_GPT3, "eval_accuracy")),
    "no run_stop": ({}, without("run_stop"), (COMMON, "run_stop")),
    "no init_stop": ({}, without("init_stop"), (COMMON, "init_stop")),
    "aborted": (dict(status="aborted"), None, (HOUSE, "run_stop")),
    "two run_starts": ({}, lambda rs: rs[:-1] + [r for r in rs if r["key"] == "run_start"] + rs[-1:], (HOUSE, "run_start")),
    "run_stop before run_start": ({}, changed("run_stop", time_ms=START_MS - 1), (HOUSE, "run_stop")),
    "submission key after init_stop": ({}, lambda rs: [r for r in rs if r["key"] != "submission_org"]
                                       + [r for r in rs if r["key"] == "submission_org"], (HOUSE, "submission_org")),
    "init took longer than the open division allows": ({}, lambda rs: changed(
        "init_start", time_ms=next(r["time_ms"] for r in rs if r["key"] == "init_stop") - 241 * 60_000)(rs),
        (COMMON, "init_stop")),
    "unknown division": ({}, changed("submission_division", value="semi-open"), (COMMON, "submission_division")),
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_logs_fail_on_the_rule_they_break(tmp_path, case):
    options, edit, expected = BROKEN[case]
    path = one_run(tmp_path, **options)
    if edit:
        edit_lines(path, edit)
    assert expected in failures(path)


def test_a_trainclock_log_in_the_closed_division_must_be_the_real_gpt3_175b(tmp_path):
    found = failures(one_run(tmp_path, division="closed"))
    closed = "training_3.1.0/closed_gpt3.yaml"
    assert {(closed, "max_sequence_length"), (closed, "eval_accuracy"), (closed, "init_checkpoint_step")} <= found


def test_a_log_value_never_picks_a_rule_file_outside_the_rule_folders(tmp_path):
    # rule files name the next file from the log's own division: "../../x" must open nothing
    path = edit_lines(one_run(tmp_path), changed("submission_division", value="../../../../tmp/x"))
    run = review_log(path, "3.1")
    assert any("no rule file training_3.1.0/../../../../tmp/x_common.yaml" in f.message for f in run.errors)


def test_findings_carry_the_log_line(tmp_path):
    path = edit_lines(one_run(tmp_path), changed("run_stop", time_ms=START_MS - 1))
    lines = path.read_text().splitlines()
    (finding,) = [f for f in review_log(path, "3.1").errors if f.rule == HOUSE]
    assert '"run_stop"' in lines[finding.lineno - 1]


def test_one_failed_run_of_three_is_dropped_two_fail_the_entry(tmp_path):
    root = write_tree(tmp_path / "one", minutes=[1.5, 1.2, 1.7])
    edit_lines(next(root.glob("results/*/*/result_1.txt")), without("run_stop"))
    (entry,) = review_path(root)
    assert entry.verdict == VALID and entry.score_minutes == pytest.approx(1.7)  # 1.2 failed: the slowest now
    shutil.copytree(root, tmp_path / "two")
    edit_lines(next((tmp_path / "two").glob("results/*/*/result_0.txt")), without("run_stop"))
    (entry,) = review_path(tmp_path / "two")
    assert entry.verdict == INVALID and entry.score_minutes is None and not entry.ok
    assert "2 of 3 runs failed review" in " ".join(entry.reasons)
