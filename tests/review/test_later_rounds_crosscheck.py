"""trainclock against the official result summarizer (mlperf_logging, installed) on the published
entries of rounds 4.0 to 5.1 in fixtures/, each run on a throwaway copy: it deletes and rewrites
scaling.json in the folders it reads."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
from pathlib import Path

import pytest

from trainclock.review.tree import review_path

from .test_later_rounds import POWER_40

GNN_41 = "Dell/results/XE9680x8H200-SXM-141GB/gnn"  # scaled by its scaling.json (1.00373)
from .test_unet3d_variants import _snapshot


def official_columns(tree: Path, ruleset: str) -> dict[Path, dict]:
    """The summarizer's detailed columns per benchmark folder of a training_results_vX.Y tree, as
    summarize_results computes them system by system."""
    from mlperf_logging.result_summarizer import result_summarizer

    found = {}
    for org in sorted(p for p in tree.iterdir() if p.is_dir()):
        for system in sorted((org / "results").iterdir()):
            desc = result_summarizer._load_system_desc(str(org), system.name)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                _, detailed = result_summarizer._compute_strong_scaling_scores(
                    desc, str(system), "training", ruleset, desc["division"])
            for benchmark in sorted(p.name for p in system.iterdir() if p.is_dir()):
                found[system / benchmark] = {key.split(":", 1)[1]: value for key, value in detailed.items()
                                             if key.split(":", 1)[0] == benchmark}
    return found


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_every_later_round_entry_matches_the_official_summarizer(later_rounds, tmp_path, monkeypatch):
    from mlperf_logging.result_summarizer import result_summarizer

    # the installed summarizer crashes on the power logs of smc-dc-power (see below); its time
    # score never reads them, so it is compared with the power computation left out
    monkeypatch.setattr(result_summarizer, "_has_power", lambda folder: False)
    logging.disable(logging.CRITICAL)  # its RCP checker logs every record it reads
    compared = {}
    try:
        for round_, tree in later_rounds.items():
            before = _snapshot(tree)
            ours = {e.context.folder.relative_to(tree): e for e in review_path(tree)}
            assert _snapshot(tree) == before  # nothing written into the tree read
            copy = tmp_path / tree.name
            shutil.copytree(tree, copy)
            for path in [copy, *copy.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
            theirs = {folder.relative_to(copy): columns
                      for folder, columns in official_columns(copy, f"{round_}.0").items()}
            assert set(theirs) == set(ours), round_
            for folder, entry in ours.items():
                official, view = theirs[folder], entry.summarizer
                score = official.get("time_to_train")
                assert (view.score is None) == (score is None), folder
                if score is not None:
                    assert f"{view.score:.6f}" == f"{score:.6f}" and view.score == pytest.approx(score, rel=1e-12)
                assert view.scaling_factor == official["rcp_scaling_factor"], folder
                assert entry.rcp.official == (official.get("RCP") or None), (folder, entry.rcp)
                assert entry.rcp.batch_size == official.get("GBS"), folder
                points = sorted(1e9 if r.rcp_point is None else r.rcp_point for r in entry.runs)
                assert sum(points[1:-1]) / len(points[1:-1]) == pytest.approx(official["samples_to_converge"],
                                                                              rel=1e-12), folder
                compared[f"v{round_}/{folder}"] = entry.benchmark
    finally:
        logging.disable(logging.NOTSET)
    assert len(compared) == 32
    # at least one entry of every benchmark each round allows (benchmark_meta, as the round has it)
    from mlperf_logging.benchmark_meta import get_allowed_benchmarks

    for round_ in later_rounds:
        present = {benchmark for name, benchmark in compared.items() if name.startswith(f"v{round_}/")}
        assert present == set(get_allowed_benchmarks("training", f"{round_}.0")), round_


@pytest.mark.slow
def test_the_installed_summarizer_crashes_on_the_power_entry_trainclock_scores(later_rounds, tmp_path):
    from mlperf_logging.result_summarizer import result_summarizer

    copy = tmp_path / "smc-dc-power"
    shutil.copytree(later_rounds["4.0"] / "smc-dc-power", copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    logging.disable(logging.CRITICAL)
    try:
        with pytest.raises(ZeroDivisionError):
            official_columns(copy.parent, "4.0.0")
    finally:
        logging.disable(logging.NOTSET)
    (entry,) = review_path(later_rounds["4.0"] / POWER_40)
    assert entry.score_minutes is not None and result_summarizer._has_power(str(later_rounds["4.0"] / POWER_40))
    # its energy cannot be computed (a node's measurement starts and stops at the same millisecond): said, not raised
    assert entry.summarizer.energy.joules is None
    assert "starts and stops at the same time" in entry.summarizer.energy.problem


def _write_power_logs(entry: Path) -> None:
    """Made-up power logs for each run of `entry`, in the layout and keys of the published ones
    (v4.1 Dell, v5.0 Lenovo): two nodes, one without power_measurement_stop, and a switch."""
    def line(time_ms: float, key: str, value) -> str:
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME",
                                         "key": key, "value": value, "metadata": {}}) + "\n"

    for k, log in enumerate(sorted(entry.glob("result_*.txt"))):
        power = entry / "power" / log.name.split(".")[0]
        power.mkdir(parents=True)
        start = 1_700_000_000_000 + k
        begin = line(start, "power_measurement_start", None)
        readings = "".join(line(start + 1000 * i + 7 * k, "power_reading", 3000.0 + 37.5 * i - 11 * k)
                           for i in range(1, 40))
        (power / "node_0.txt").write_text(begin + line(start, "conversion_eff", 0.96) + readings
                                          + line(start + 35_000, "power_measurement_stop", None))
        (power / "node_1.txt").write_text("noise\n" + begin + readings[:len(readings) // 2].rpartition("\n")[0] + "\n")
        (power / "sw_0.txt").write_text(line(start, "conversion_eff", 0.9)
                                        + line(start, "interconnect_power_est", 410.5 + k))


def test_energy_equals_the_installed_summarizers(later_rounds, tmp_path):
    from mlperf_logging.result_summarizer import result_summarizer

    copy = tmp_path / "training_results_v4.1" / GNN_41
    shutil.copytree(later_rounds["4.1"] / GNN_41, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    _write_power_logs(copy)
    (entry,) = review_path(copy)
    energy = entry.summarizer.energy
    assert energy.problem is None and energy.runs == 8  # the runs the time score averages
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score, joules, _ = result_summarizer._compute_strong_score_standalone(
                "gnn", copy.parent.name, True, str(copy), "training", "4.1.0", {"submitter": "Dell"})
    finally:
        logging.disable(logging.NOTSET)
    assert score == entry.summarizer.score and energy.joules == pytest.approx(joules, rel=1e-12)
    assert entry.score_minutes is not None and entry.scaling_factor != 1  # the factor multiplies the energy too
