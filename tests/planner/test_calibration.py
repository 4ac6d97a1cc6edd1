"""The calibration against the published GPT-3 results in shared/mlperf-results: it must reproduce
what it was fitted on and predict what it was not, in total and part by part (the goal: mean <= 3%,
worst <= 6% on entries left out of the fit)."""

import pytest

from trainclock.planner.calibration import result_files
from trainclock.planner.model.memory import memory_per_accelerator
from trainclock.planner.validation.result_file_checks import EXTRAPOLATE_FROM, GOAL_MEAN_ERROR, GOAL_WORST_ERROR


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
    for log in report.logs:  # fitted to evaluation and steady step times (with the scores)
        assert log.model_eval_s == pytest.approx(log.logged_eval_s, rel=0.01)
        assert log.model_step_s == pytest.approx(log.logged_step_s, rel=0.08)


def test_a_log_is_measured_part_by_part(data):
    eos = data.timings["h100-sxm/v3.1"]  # one run of 288 steps at batch 2048, 24 evaluations
    assert eos.steps == pytest.approx(288) and eos.evaluations == 24
    assert eos.mean_step_s == pytest.approx(11.066, abs=0.01)
    assert eos.mean_train_s + eos.mean_evals_s + eos.mean_remainder_s == pytest.approx(eos.mean_run_s)
    gaudi = data.timings["gaudi2/v3.0"]  # start-up inside the timed region: minutes, not seconds
    assert 100 < gaudi.mean_remainder_s < 400


def test_parts_add_up_and_are_checked_where_the_entry_has_logs(report, data):
    with_logs = {s.timing_entry for s in data.stacks.values()}
    for row in report.leave_one_out:
        assert (row.parts is not None) == (row.entry.key in with_logs)
        if row.parts:
            for side in (row.parts.measured, row.parts.predicted):
                assert side["training"] + side["evaluations"] + side["rest"] == pytest.approx(side["total"])


def test_leave_one_out_meets_the_goal_in_total_on_entries_left_out_of_the_fit(report):
    assert len(report.leave_one_out) == 11
    for row in report.leave_one_out:
        assert row.entry.key not in row.fit.fitted_on  # really left out
    mean, worst = result_files.error_summary(report.leave_one_out)
    assert mean <= GOAL_MEAN_ERROR and worst <= GOAL_WORST_ERROR, (mean, worst)


def test_fit_on_small_systems_predicts_1536_and_3584_gpus_in_total(report, data):
    assert EXTRAPOLATE_FROM == 768
    assert sorted(r.entry.published.accelerators for r in report.extrapolation) == [1536, 3584]
    for row in report.extrapolation:
        assert all(data.entry(key).published.accelerators <= 768 for key in row.fit.fitted_on)
    (big,) = [r for r in report.extrapolation if r.entry.published.accelerators == 3584]
    assert "borrowed" in big.fit.overhead_source  # its own log was left out with it
    mean, worst = result_files.error_summary(report.extrapolation)
    assert mean <= GOAL_MEAN_ERROR and worst <= GOAL_WORST_ERROR, (mean, worst)


def test_the_verdict_covers_the_training_part_too(report):
    rows = {(name, part): summary for name, part, summary in report.goal_rows()}
    assert set(rows) == {(n, p) for n in ("leave-one-out", "extrapolation") for p in ("total", "training")}
    assert report.meets_goal == all(s[0] <= GOAL_MEAN_ERROR and s[1] <= GOAL_WORST_ERROR for s in rows.values() if s)


def test_projection_to_10752_gpus_lands_near_the_published_eos_result(report):
    # NVIDIA Eos, MLPerf v3.1, 10,752 H100: 3.92 min (DESIGN.md); not in the calibration table
    assert [p.prediction.count for p in report.projections] == [10752, 10752]
    for p in report.projections:
        assert p.prediction.time_to_train_s / 60 == pytest.approx(3.92, rel=0.15), p.how
