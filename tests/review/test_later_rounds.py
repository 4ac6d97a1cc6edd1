"""Trees of rounds 4.0 to 5.1: the round of a tree, the division from the system description,
benchmarks a round has no rules for, and power entries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from trainclock.errors import UsageError
from trainclock.review.entry import INVALID, VALID
from trainclock.review.render import print_review
from trainclock.review.round_inference import ROUND_KEY
from trainclock.review.rounds import unnamed_own_round
from trainclock.review.tree import review_path

GNN_40 = "ASUSTeK/results/ESC_N8A-E12/gnn"
FLUX_51 = "University-of-Florida/results/hpg.dgxb200x8.n9/flux1"
POWER_40 = "smc-dc-power/results/1xSMC-H100-SXM-80GB/dlrm_dcnv2"


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def test_the_round_comes_from_the_tree_folder(later_rounds):
    for round_, tree in later_rounds.items():
        entries = review_path(tree)
        assert entries and {(e.context.round, e.context.round_source) for e in entries} == {(round_, "path")}


@pytest.mark.parametrize("round_, entry", [("4.0", GNN_40), ("4.1", "Dell/results/XE9680x8H200-SXM-141GB/gnn"),
                                           ("5.1", FLUX_51), ("5.0", "tinycorp/results/tinybox_red/bert")])
def test_without_a_round_folder_the_logs_tell_it(later_rounds, tmp_path, round_, entry):
    folder = _copy(later_rounds[round_] / entry, tmp_path / "downloads" / "entry")
    (found,) = review_path(folder)
    assert (found.context.round, found.context.round_source) == (round_, "default")
    assert found.summarizer.score is not None


def test_a_round_the_logs_cannot_tell_is_one_line(later_rounds, tmp_path):
    folder = _copy(later_rounds["4.0"] / GNN_40, tmp_path / "entry")
    for log in folder.glob("result_*.txt"):  # gnn is in 4.0 and 4.1; a run_start after both were published
        log.write_text(log.read_text().replace('"time_ms": 17', '"time_ms": 19'))
    with pytest.raises(UsageError, match=r"cannot tell the round of .*entry: gnn is in rounds 4.0, 4.1 .*--round") as e:
        review_path(folder)
    assert "\n" not in str(e.value)
    (log := folder / "result_0.txt").write_text(log.read_text().replace('"gnn"', '"nothing_known"'))
    with pytest.raises(UsageError, match="its logs name 'nothing_known', which no round 3.0, .*6.1 has"):
        review_path(log)


def test_trainclock_runs_that_name_no_round_are_31s(trainclock_tree):
    (entry,) = review_path(trainclock_tree)
    assert (entry.context.round, entry.context.round_source) == (unnamed_own_round(), "default")


def _name_round(tree: Path, named: str) -> None:
    """Each log of `tree` names `named` as its round, in the header line after trainclock_workload."""
    prefix = ":::MLLOG "
    for log in tree.rglob("result_*.txt"):
        lines = [line for line in log.read_text().splitlines() if f'"key": "{ROUND_KEY}"' not in line]
        at = next(i for i, line in enumerate(lines) if '"key": "trainclock_workload"' in line)
        event = json.loads(lines[at].removeprefix(prefix)) | {"key": ROUND_KEY, "value": named}
        lines.insert(at + 1, prefix + json.dumps(event))
        log.write_text("\n".join(lines) + "\n")


def test_a_trainclock_run_is_reviewed_under_the_round_its_log_names(trainclock_tree, tmp_path):
    tree = _copy(trainclock_tree, tmp_path / "tree")
    _name_round(tree, "5.0")
    (entry,) = review_path(tree)
    assert (entry.context.round, entry.context.round_source) == ("5.0", "default")
    _name_round(tree, "9.9")
    with pytest.raises(UsageError, match=r"its logs name round '9.9', which the review has no rules for .*--round"):
        review_path(tree)


def test_every_benchmark_follows_a_round_the_review_has_rules_for():
    from trainclock.review.rounds import all_rounds
    from trainclock.workload import registry

    for workload in registry.workloads():
        assert workload.mlperf_round in all_rounds(), workload.key
        assert workload.key in all_rounds()[workload.mlperf_round].benchmarks, workload.key


def test_a_benchmark_the_round_lacks_is_one_line_per_entry(later_rounds, tmp_path):
    folder = _copy(later_rounds["4.0"] / "ASUSTeK", tmp_path / "v3.1" / "ASUSTeK")
    entries = review_path(folder)
    assert {e.name for e in entries} == {"gnn", "dlrm_dcnv2"}
    (gnn,) = [e for e in entries if e.name == "gnn"]
    assert gnn.verdict == INVALID and gnn.rule is None and gnn.score_minutes is None
    assert gnn.reasons == ("not scored: round 3.1 has no benchmark 'gnn': its benchmarks are bert, dlrm_dcnv2, "
                           "gpt3, maskrcnn, resnet, ssd, rnnt, unet3d, stable_diffusion; is the round right? (--round)",)
    console = Console(record=True, width=300)
    print_review([gnn], console)
    text = console.export_text()
    assert "is the round right" in text and "result_0.txt" not in text  # no run-by-run wall of failures


def test_the_division_is_the_system_descriptions(later_rounds, tmp_path):
    tree = _copy(later_rounds["4.0"] / "ASUSTeK", tmp_path / "v4.0" / "ASUSTeK")
    (before,) = [e for e in review_path(tree) if e.name == "gnn"]
    assert before.division == "closed" and before.rcp.official == "Pass"
    desc = tree / "systems" / "ESC_N8A-E12.json"
    desc.write_text(json.dumps({**json.loads(desc.read_text()), "division": "open"}))
    (after,) = [e for e in review_path(tree) if e.name == "gnn"]
    # the logs still say closed; the summarizer skips the RCP check of an open system and scores it
    assert {r.division for r in after.runs} == {"closed"} and after.division == "open"
    assert after.rcp.status == "n/a" and after.rcp.official is None
    assert after.verdict == VALID and after.score_minutes == before.score_minutes


def test_a_power_entry_is_scored_by_its_time(later_rounds):
    """smc-dc-power (v4.0): the summarizer 4.1.68 installed here crashes on its power logs
    (ZeroDivisionError: power_measurement_start and _stop at the same time); its time score does
    not depend on them, and trainclock gives it."""
    (entry,) = review_path(later_rounds["4.0"] / POWER_40)
    assert entry.verdict == VALID and len(entry.runs) == 10  # 5 runs and 5 "raw" copies: all result_*.txt
    assert f"{entry.score_minutes:.6f}" == "3.836477"


WITHHELD_41 = "Dell/results/R760x2H100NVL-PCIe-94GB/ssd"  # RCP "Missing" at batch size 128, no scaling.json


def test_a_score_withheld_on_a_failed_rcp_check_shows_the_summarizers_beside_it(later_rounds):
    from trainclock.review.as_json import review_as_json
    from trainclock.review.entry import SCORE_WITHHELD

    (entry,) = review_path(later_rounds["4.1"] / WITHHELD_41)
    assert entry.verdict == INVALID and entry.score_minutes is None and entry.rcp.official == "Missing"
    assert f"{entry.summarizer_score:.6f}" == "172.839311"
    (why,) = [r for r in entry.reasons if r.startswith(SCORE_WITHHELD)]
    assert "no scaling.json records the review committee's ruling" in why and why.endswith("172.839311 regardless")
    console = Console(record=True, width=300)
    print_review([entry], console)
    text = console.export_text()
    (row,) = [line for line in text.splitlines() if line.startswith("  4.1 Dell")]  # the table's row
    # score, summarizer, scaling, RCP, verdict
    assert row.split()[-5:] == ["—", "172.839311", "—", "fail", "invalid"]
    assert "trainclock withholds the score of an entry whose RCP check failed without a scaling.json" in text
    (shown,) = json.loads(review_as_json([entry]))["entries"]
    assert shown["score_minutes"] is None and f"{shown['summarizer_score_minutes']:.6f}" == "172.839311"
    assert why in shown["reasons"]


def test_where_trainclock_scores_the_summarizer_column_says_the_same(later_rounds):
    entries = review_path(later_rounds["5.1"])
    assert all(e.summarizer_score == e.score_minutes for e in entries)
    console = Console(record=True, width=300)
    print_review(entries, console)
    text = console.export_text()
    assert "withholds" not in text  # the note comes only with a difference
    rows = [line for line in text.splitlines() if line.startswith("  5.1 ")]
    assert len(rows) == len(entries) and all(line.split()[-4] == "=" for line in rows)
