"""Synthetic variants of the Dell unet3d entry (shared/mlperf-suite, 40 runs), built from its real
logs in tmp dirs: non-converged runs up to the allowance (4) and past it, scaling.json present or
missing, a log that lost its run_stop."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from trainclock.review.entry import INVALID, VALID
from trainclock.review.tree import review_path

from .test_tree import run_command

DELL = "v3.1/Dell"
UNET3D = "results/XE9680x8H100-SXM-80GB/unet3d"
COMMITTEE = 1.093162  # the scaling.json the MLCommons repository has beside these logs


@pytest.fixture(scope="module")
def original(shared_suite, tmp_path_factory):
    """The review of the unmodified logs, with the committee's scaling.json."""
    (entry,) = review_path(_copy(shared_suite, tmp_path_factory.mktemp("unet3d"), scaling=True))
    return entry


def _copy(shared_suite: Path, tmp: Path, scaling: bool) -> Path:
    """A copy of Dell's unet3d entry laid out as the tree (systems/ beside results/)."""
    shutil.copytree(shared_suite / DELL / UNET3D, tmp / DELL / UNET3D)
    shutil.copytree(shared_suite / DELL / "systems", tmp / DELL / "systems")
    scaling_json = tmp / DELL / UNET3D / "scaling.json"
    if scaling:
        scaling_json.write_text(json.dumps({"scaling_factor": COMMITTEE}))
    else:
        scaling_json.unlink(missing_ok=True)
    return tmp / DELL / UNET3D


@pytest.fixture
def unet3d(shared_suite, tmp_path):
    return lambda scaling=True: _copy(shared_suite, tmp_path, scaling)


def never_converge(log: Path) -> None:
    """The run as it reads when it misses the target: every eval below 0.908 DICE, run_stop aborted."""
    text = log.read_text()
    text = re.sub(r'("key": "eval_accuracy", "value": )[0-9.]+', r"\g<1>0.5", text)
    log.write_text(text.replace('"status": "success"', '"status": "aborted"'))


def expected_score(original, failed: set[str]) -> float:
    # an independent reading of the rule: the failed runs take the places of the slowest, so the
    # 32 runs after the 4 fastest of the converged ones are averaged
    minutes = sorted(r.minutes for r in original.runs if r.path.name not in failed)
    kept = minutes[4:4 + 32]
    return sum(kept) / len(kept) * COMMITTEE


@pytest.mark.parametrize("count", [1, 2, 4])
def test_non_converged_runs_are_dropped_as_the_slowest_while_the_allowance_holds(unet3d, original, count):
    folder = unet3d()
    # the fastest runs: their place among the averaged runs is what moves the score
    fastest = [r.path.name for r in sorted(original.runs, key=lambda r: r.minutes)[4:4 + count]]
    for name in fastest:
        never_converge(folder / name)
    (entry,) = review_path(folder)
    assert entry.verdict == VALID and entry.score_minutes == pytest.approx(expected_score(original, set(fastest)),
                                                                         rel=1e-12)
    view = entry.summarizer
    assert len(view.not_converged) == count and view.not_converged_allowed == 4
    assert len(view.used) == 32 and len(view.dropped_fastest) == 4 and len(view.dropped_slowest) == 4 - count
    for name in fastest:
        assert name not in view.used
        # file:line of the reason: the first error with a line
        assert any(re.match(rf"{re.escape(str(folder / name))}:\d+: ", run) for run in view.not_converged), view
    assert "NOTICE: Dropping non-converged run(s) for Dell/XE9680x8H100-SXM-80GB/unet3d using olympic scoring." \
        in view.lines
    assert any(f"{count} run(s) failed review (did not converge" in reason for reason in entry.reasons)


def test_five_non_converged_runs_of_forty_are_one_too_many(unet3d):
    folder = unet3d()
    names = [f"result_{i}.txt" for i in range(5)]
    for name in names:
        never_converge(folder / name)
    (entry,) = review_path(folder)
    assert entry.verdict == INVALID and entry.score_minutes is None and entry.summarizer.score is None
    assert "5 of 40 runs failed review (did not converge or broke a rule); at most 4 may for unet3d: no score" \
        in entry.reasons
    assert entry.summarizer.lines[0] == "CRITICAL ERROR: Too many non-converging runs for Dell/XE9680x8H100-SXM-80GB/unet3d"
    assert entry.rcp.status == "fail" and entry.rcp.official_message == "Insufficient convergence"
    for name in names:
        assert any(reason.startswith(f"{folder / name}:") for reason in entry.reasons)


def test_a_committed_scaling_json_scales_and_rules_on_the_failed_rcp_check(unet3d):
    (scaled,) = review_path(unet3d(scaling=True))
    assert scaled.verdict == VALID and f"{scaled.score_minutes:.6f}" == "13.212294"
    assert scaled.rcp.status == "fail" and scaled.rcp.official == "Fail"  # shown, not hidden
    assert scaled.scaling_factor == COMMITTEE and scaled.scaling_path.name == "scaling.json"
    assert any("committee's scaling.json (1.09316) applies to the failed RCP check" in r for r in scaled.reasons)


def test_without_scaling_json_a_failed_rcp_check_leaves_no_official_score(unet3d):
    (bare,) = review_path(unet3d(scaling=False))
    assert bare.verdict == INVALID and bare.score_minutes is None
    assert f"{bare.summarizer.score:.6f}" == "12.086309" and bare.scaling_factor == 1.0 and bare.scaling_path is None
    assert "ERROR: RCP Test Failed on Dell/XE9680x8H100-SXM-80GB/unet3d with message: RCP found." in bare.summarizer.lines


def test_a_log_without_run_stop_counts_as_non_converged_with_its_file_and_line(unet3d, original):
    folder = unet3d()
    log = folder / "result_7.txt"
    lines = log.read_text().splitlines(keepends=True)
    (stop,) = [i for i, line in enumerate(lines) if '"key": "run_stop"' in line]
    log.write_text("".join(lines[:stop] + lines[stop + 1:]))
    (entry,) = review_path(folder)
    run = next(r for r in entry.runs if r.path == log)
    assert not run.passed and run.rcp_point is None and run.time_to_train_ms is None
    (where,) = entry.summarizer.not_converged
    assert re.match(rf"{re.escape(str(log))}:\d+: ", where), where
    assert entry.verdict == VALID
    assert entry.score_minutes == pytest.approx(expected_score(original, {"result_7.txt"}), rel=1e-12)


def _snapshot(root: Path) -> dict:
    return {p: (p.stat().st_mode, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


def test_the_review_never_writes_to_what_it_reads(unet3d, capsys):
    # the official RCP checker deletes this scaling.json (its check fails); the review must not
    folder = unet3d(scaling=True)
    root = folder.parents[3]
    before = _snapshot(root)
    review_path(root)
    assert run_command([str(root), "--json"]) == 0
    capsys.readouterr()
    assert _snapshot(root) == before


def test_json_gives_what_the_summarizer_would_print(unet3d, capsys):
    folder = unet3d(scaling=True)
    never_converge(folder / "result_0.txt")
    assert run_command([str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (entry,) = data["entries"]
    assert data["ok"] and entry["verdict"] == "valid" and entry["benchmark"] == "unet3d"
    assert entry["score_minutes"] == entry["summarizer"]["score"] and entry["scaling_factor"] == COMMITTEE
    assert entry["scaling_json"].endswith("scaling.json")
    summary = entry["summarizer"]
    assert len(summary["runs_used"]) == 32 and len(summary["dropped_fastest"]) == 4
    assert len(summary["dropped_slowest"]) == 3 and summary["not_converged_allowed"] == 4
    assert summary["not_converged"][0].startswith(f"{folder / 'result_0.txt'}:")
    assert entry["rcp"]["official"] in ("Pass", "Fail") and entry["rcp"]["batch_size"] == 56
    (run,) = [r for r in entry["runs"] if r["file"].endswith("/result_0.txt")]
    assert not run["counted"] and run["rcp_point"] is None and run["status"] == "aborted"
    assert run["where"].startswith(str(folder / "result_0.txt") + ":")
