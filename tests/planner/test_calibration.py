"""The calibration against the published GPT-3 results in shared/mlperf-results: it must reproduce
what it was fitted on and predict what it was not (the issue's goal: mean <= 5%, worst <= 10%)."""

import pytest

from trainclock.planner import calibrate
from trainclock.planner.memory import memory_per_accelerator
from trainclock.planner.validation import EXTRAPOLATE_FROM, GOAL_MEAN_ERROR, GOAL_WORST_ERROR


def test_every_published_entry_is_calibrated(data):
    assert data.cost.name == "gpt3-175b"  # submissions.toml's benchmark, at full size, through the registry
    assert len(data.entries) == 11
    assert {e.stack.id for e in data.entries} == {"h100-sxm/v3.0", "h100-sxm/v3.1", "gaudi2/v3.0", "gaudi2/v3.1"}


def test_the_scored_run_is_the_middle_one(data):
    entry = data.entry("v3.0/coreweave_hgxh100_n192_ngc23.04_pytorch")  # 23.54, 25.53, 23.61 min: score 23.61
    assert entry.published.scored_run_units == 1258291200
    assert data.entry("v3.0/HLS-Gaudi2-N32-PT").published.scored_run_units == 1157627904  # 442.58 of 441.3/442.58/460.3


def test_assumed_layouts_agree_with_the_logs_and_fit_in_memory(data):
    for stack_id, timing in data.timings.items():
        entry = data.entry(data.stacks[stack_id].timing_entry)
        assert entry.plan.micro_batches(timing.global_batch_size) == timing.gradient_accumulation_steps, stack_id
    for e in data.entries:  # these systems ran, so their layouts must fit
        m = memory_per_accelerator(data.cost, e.published.global_batch_size, e.plan, e.stack.accelerator)
        assert m.fits, f"{e.key}: {m.total / 1e9:.1f} GB"


def test_fit_reproduces_its_entries_and_logs(report):
    timing_errors = [abs(c.timing_error) for c in report.fitted]
    assert max(timing_errors) < 0.06 and sum(timing_errors) / len(timing_errors) < 0.025
    for fit in report.fits.values():
        assert 0.2 < fit.efficiency.compute < 0.9  # a physically sensible fraction of peak
    for log in report.logs:  # evaluation times are fitted; step times are not, yet agree
        assert log.model_eval_s == pytest.approx(log.logged_eval_s, rel=0.01)
        assert log.model_step_s == pytest.approx(log.logged_step_s, rel=0.08)


def test_leave_one_out_meets_the_goal_on_entries_left_out_of_the_fit(report):
    assert len(report.leave_one_out) == 11
    for row in report.leave_one_out:
        assert row.entry.key not in row.fit.fitted_on  # really left out
    mean, worst = calibrate.error_summary(report.leave_one_out)
    assert mean <= GOAL_MEAN_ERROR and worst <= GOAL_WORST_ERROR, (mean, worst)
    assert report.meets_goal


def test_fit_on_small_systems_predicts_3584_gpus(report, data):
    (row,) = report.extrapolation
    assert row.entry.published.accelerators == 3584 and EXTRAPOLATE_FROM == 1536
    assert all(data.entry(key).published.accelerators <= 1536 for key in row.fit.fitted_on)
    assert "borrowed" in row.fit.overhead_source  # its own log was left out with it
    assert abs(row.error) <= GOAL_WORST_ERROR, row.error


def test_projection_to_10752_gpus_lands_near_the_published_eos_result(report):
    # NVIDIA Eos, MLPerf v3.1, 10,752 H100: 3.92 min (DESIGN.md); not in the calibration table
    assert [p.prediction.count for p in report.projections] == [10752, 10752]
    for p in report.projections:
        assert p.prediction.time_to_train_s / 60 == pytest.approx(3.92, rel=0.15), p.how
