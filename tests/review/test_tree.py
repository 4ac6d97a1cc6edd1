"""`review_path` on every kind of path, and the `trainclock review` command."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

from trainclock.commands import review as review_command
from trainclock.errors import DataError, UsageError
from trainclock.review.tree import review_path

GAUDI_31 = "v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3"


@pytest.mark.parametrize("relative, entries", [
    (GAUDI_31 + "/result_1.txt", 1),  # one log
    (GAUDI_31, 1),  # a benchmark folder
    ("v3.1/NVIDIA/results/eos_n8_ngc23.04_pytorch", 1),  # a system folder
    ("v3.1/NVIDIA", 3),  # an organization
    ("v3.0", 2),  # a round
])
def test_any_level_of_a_result_tree(shared_results, shared_entries, relative, entries):
    found = review_path(shared_results / relative)
    assert len(found) == entries
    for entry in found:
        assert entry.context.org and entry.context.system and entry.context.round == relative[1:4]
        if len(entry.runs) > 1:
            same = next(e for e in shared_entries.values() if e.context.folder == entry.context.folder)
            assert entry.score_minutes == same.score_minutes


def test_a_single_log_of_an_entry_is_reviewed_in_its_context(shared_results):
    (entry,) = review_path(shared_results / GAUDI_31 / "result_1.txt")
    assert entry.accelerators == 384 and entry.verdict == "incomplete" and entry.score_minutes is None
    assert entry.runs[0].minutes == pytest.approx(153.540550, abs=1e-6)


def test_the_shared_reference_points_give_the_same_checks(shared_results, shared_entries):
    # shared/mlperf-results/rcps holds gpt3's and bert's: the same as the package's
    checked = 0
    for entry in review_path(shared_results, rcp_dir=shared_results / "rcps"):
        same = next(e for e in shared_entries.values() if e.context.folder == entry.context.folder)
        if entry.benchmark in ("gpt3", "bert"):
            assert entry.rcp == same.rcp and entry.rcp.status in ("pass", "fail")
            checked += 1
        else:
            assert entry.rcp.status == "n/a" and "no reference convergence points" in entry.rcp.message
    assert checked == 7


def test_round_option_overrides_the_folder(shared_results):
    (entry,) = review_path(shared_results / GAUDI_31, round_="3.0")
    assert entry.context.round_source == "option"
    assert {f.rule.split("/")[0] for r in entry.runs for f in r.findings} <= {"training_3.0.0", "trainclock"}


def test_unsupported_rounds_are_refused(shared_results, tmp_path):
    with pytest.raises(UsageError, match="round '2.1' \\(--round\\).*3.0, 3.1"):
        review_path(shared_results / GAUDI_31, round_="2.1")
    shutil.copytree(shared_results / GAUDI_31, tmp_path / "training_results_v2.1" / "Intel" / "results" / "x" / "gpt3")
    with pytest.raises(UsageError, match="round '2.1' \\(the folder training_results_v2.1 in"):
        review_path(tmp_path / "training_results_v2.1")


def test_missing_and_empty_paths_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file or folder: .*nothing.*give a result log"):
        review_path(tmp_path / "nothing")
    with pytest.raises(UsageError, match="no result_\\*.txt logs under"):
        review_path(tmp_path)


@pytest.mark.parametrize("content, message", [("{", "is not valid JSON"), ("[]", "must hold a JSON object")])
def test_a_bad_system_description_is_a_data_error(copy_of, content, message):
    folder = copy_of("v3.1/Intel-HabanaLabs")
    (folder / "systems" / "HLS-Gaudi2-N48-PT.json").write_text(content)
    with pytest.raises(DataError, match=f"HLS-Gaudi2-N48-PT.json {message}.*fix or remove"):
        review_path(folder)


def test_system_description_fields_are_passed_on(shared_entries):
    entry = shared_entries["v3.1/NVIDIA/eos_n8_ngc23.04_pytorch/bert"]
    assert entry.context.system_path.name == "eos_n8_ngc23.04_pytorch.json"
    assert entry.context.system_desc["framework"] == "PyTorch NVIDIA Release 23.04"
    assert entry.accelerators == 64  # 8 nodes of 8 H100


def run_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="trainclock")
    review_command.register(parser.add_subparsers(required=True))
    args = parser.parse_args(["review", *argv])
    return args.func(args)


def test_command_prints_every_official_score(shared_results, capsys):
    assert run_command([str(shared_results)]) == 0
    out = capsys.readouterr().out
    for score in ("311.944883", "10.940417", "153.581333", "0.898131", "44.471883", "58.246867", "45.611733", "4.514317"):
        assert score in out
    assert out.count("incomplete") >= 4 and "✗1.003533" in out and "3,584" in out


def test_command_fails_on_a_failed_run_and_says_why(copy_of, capsys):
    # a deep folder: the paths and reasons printed must stay whole whatever the console width
    log = copy_of("v3.1/NVIDIA/results/eos_n8_ngc23.04_pytorch/bert") / "result_4.txt"
    assert run_command([str(log), "--verbose"]) == 1
    out = capsys.readouterr().out
    assert f"{log}:517" in out and "no eval_accuracy line meets the quality target" in out


def test_command_reviews_several_paths(shared_results, trainclock_tree, capsys):
    assert run_command([str(shared_results / "v3.0"), str(trainclock_tree)]) == 0
    out = capsys.readouterr().out
    assert "gpt3-tiny" in out and "311.944883" in out and "round assumed" in out


def test_command_refuses_a_bad_rcp_dir(shared_results, tmp_path):
    with pytest.raises(UsageError, match="--rcp-dir .* is not a folder"):
        run_command([str(shared_results / GAUDI_31), "--rcp-dir", str(tmp_path / "none")])


def test_the_review_reads_logs_only(shared_results, copy_of):
    # the official rcp_checker writes scaling.json into result folders; the review never writes
    folder = copy_of("v3.1/NVIDIA")
    before = sorted((p, p.stat().st_mtime_ns) for p in folder.rglob("*"))
    review_path(folder)
    assert sorted((p, p.stat().st_mtime_ns) for p in folder.rglob("*")) == before
    assert json.loads((folder / "systems" / "eos_n8_ngc23.04_pytorch.json").read_text())["submitter"] == "NVIDIA"
