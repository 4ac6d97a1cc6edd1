"""Every benchmark but GPT-3 calibrated on the published v3.1 scores in shared/mlperf-suite: what is
read and what is left out, leave-one-out that really leaves the entry out, the plan's calibration
for a benchmark, and bad input."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from trainclock.errors import DataError
from trainclock.planner.calibration import published_scores
from trainclock.planner.model.workload_view import cost_model
from trainclock.planner.plan import Planner
from trainclock.planner.validation.score_checks import same_hardware_spread, validate_suite

SUITE = (Path(__file__).resolve().parents[2] / ".." / "shared" / "mlperf-suite").resolve()


@pytest.fixture(scope="module")
def resnet(catalogue, mlperf_dir):
    data = published_scores.load_suite(published_scores.suite_dir(SUITE), catalogue, lambda: mlperf_dir, only="resnet")
    return data.benchmarks["resnet"]


def test_the_published_table_is_read_and_the_uncalibratable_entries_are_counted(catalogue, mlperf_dir):
    rows = published_scores.read_scores(SUITE)
    assert len(rows) == 194 and {r.benchmark for r in rows} >= {"bert", "resnet", "unet3d", "dlrm_dcnv2", "gpt3"}
    data = published_scores.load_suite(SUITE, catalogue, lambda: mlperf_dir, only="resnet")
    calibrated = sum(len(entries) for entries in data.benchmarks["resnet"].groups.values())
    assert calibrated + sum(data.left_out.values()) == sum(r.benchmark == "resnet" for r in rows)
    assert data.left_out["CPUs only (no accelerator)"] == 0 or "resnet" in {r.benchmark for r in rows if r.count == 0}


def test_a_fit_reproduces_its_entries_and_the_evaluation_log(resnet):
    fit = published_scores.fit_group(resnet, "h100-sxm")
    assert "fitted to Dell/XE9680x8H100-SXM-80GB's log" == fit.overhead_source
    errors = [abs(e.predicted_minutes(fit.efficiency) / e.row.score_minutes - 1) for e in resnet.groups["h100-sxm"]]
    assert sorted(errors)[len(errors) // 2] < 0.05  # the median entry within 5%
    assert 0.05 < fit.efficiency.compute < 1  # a convolution network: a fraction of the bf16 peak


def test_leave_one_out_fits_without_the_entry_it_predicts(resnet):
    rows = published_scores.leave_one_out(resnet)
    assert rows and all(r.entry.row.key not in r.fit.fitted_on for r in rows)
    # leaving out the timing log's own entry takes the evaluation overhead away from that log
    dell = next(r for r in rows if r.entry.row.key == "Dell/XE9680x8H100-SXM-80GB")
    assert "Dell" not in dell.fit.overhead_source
    everything = published_scores.fit_group(resnet, "h100-sxm")
    assert dell.fit.efficiency != everything.efficiency
    for r in rows:  # the prediction is the left-out fit's, not the fit on everything
        assert r.predicted_min == pytest.approx(r.entry.predicted_minutes(r.fit.efficiency))


def test_same_hardware_spread_is_what_submitters_differ_by(resnet):
    spread = same_hardware_spread(resnet)
    assert spread is not None and 0 < spread < 0.2


def test_validate_reports_each_benchmark_with_a_leave_one_out_table(catalogue, mlperf_dir):
    report = validate_suite(SUITE, catalogue, lambda: mlperf_dir)
    keys = {b.key for b in report.benchmarks}
    assert {"bert", "resnet", "unet3d", "dlrm_dcnv2"} <= keys and "gpt3" not in keys
    for b in report.benchmarks:
        assert b.leave_one_out and b.fits
        mean, worst = b.error_summary
        assert 0 <= mean <= worst and math.isfinite(worst)
    assert report.left_out["open division"] >= 1


def test_a_benchmark_plans_with_its_own_calibration_or_says_what_stands_in(catalogue, mlperf_dir):
    planner = Planner(cost_model("resnet"), catalogue, mlperf_dir)
    own = planner.calibrated(catalogue["h100-sxm"])
    assert own.source.startswith("published resnet scores of 14 h100-sxm entries")
    assert own.template.zero == 0 and not own.template.sequence_parallel
    borrowed = planner.calibrated(catalogue["h200"])  # no resnet entry on H200: its `like`, the H100
    assert "borrowed from h100-sxm" in borrowed.source
    dlrm = Planner(cost_model("dlrm_dcnv2"), catalogue, mlperf_dir)
    stand_in = dlrm.calibrated(catalogue["gaudi2"])  # no dlrm entry on Gaudi2: its GPT-3 stack stands in
    assert stand_in.source.startswith("gaudi2/v3.1") and "no published dlrm_dcnv2 result on gaudi2" in stand_in.source


def test_a_system_of_smaller_nodes_plans_on_the_nodes_it_has(catalogue):
    h100 = catalogue["h100-sxm"]
    two_of_four = published_scores.ScoreRow("resnet", "closed", "Dell", "2xXE8640x4H100-SXM-80GB", h100.name, 8, 14.0, nodes=2)
    assert two_of_four.on_its_nodes(h100).accelerators_per_node == 4
    eight_of_eight = published_scores.ScoreRow("resnet", "closed", "NVIDIA", "Eos_n8", h100.name, 64, 2.5, nodes=8)
    assert eight_of_eight.on_its_nodes(h100) == h100
    rows = {(r.submitter, r.system, r.benchmark): r for r in published_scores.read_scores(SUITE)}
    assert rows[("Dell", "2xXE8640x4H100-SXM-80GB", "resnet")].nodes == 2


def test_bad_or_missing_scores_are_one_line_errors(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="no published_v3.1_scores.csv in"):
        published_scores.suite_dir(tmp_path)
    shutil.copy(SUITE / published_scores.SCORES_CSV, tmp_path / published_scores.SCORES_CSV)
    text = (tmp_path / published_scores.SCORES_CSV).read_text().splitlines()
    (tmp_path / published_scores.SCORES_CSV).write_text("\n".join([text[0], text[1].replace(",", ";", 3)]) + "\n")
    with pytest.raises(DataError, match="unreadable published scores") as e:
        published_scores.read_scores(tmp_path)
    assert "\n" not in str(e.value)
    monkeypatch.setenv(published_scores.ENV_VAR, str(tmp_path / "elsewhere"))
    with pytest.raises(DataError, match="elsewhere"):
        published_scores.suite_dir()
