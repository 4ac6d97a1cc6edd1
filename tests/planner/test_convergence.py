import pytest

from trainclock.errors import UsageError
from trainclock.planner.model.convergence import eval_interval_samples, load_convergence
from trainclock.planner.model.workload_view import cost_model
from trainclock.workloads.gpt3 import cost as gpt3_cost

COST = cost_model("gpt3-175b")
MEAN_2048 = (3 * 1157627904 + 3 * 1207959552) / 6  # rcps_gpt3.json, gpt3_ref_2048
MEAN_3072 = (1258291200 + 5 * 1207959552) / 6


@pytest.fixture
def rcps(mlperf_dir):
    return load_convergence(COST, lambda: mlperf_dir)


def test_reference_points_are_the_mean_tokens_at_each_batch(rcps):
    assert rcps.batch_range == (1536, 8192) and rcps.unit == "tokens"
    assert rcps.units_needed(2048) == pytest.approx(MEAN_2048)
    assert rcps.units_needed(2560) == pytest.approx((MEAN_2048 + MEAN_3072) / 2)  # linear in between


def test_a_run_stops_at_the_first_evaluation_past_the_target(rcps):
    # the 3,584-GPU entry: batch 2688 evaluates every ceil(24576 / 2688) = 10 steps
    interval = eval_interval_samples(COST, 2688)
    assert interval == 10 * 2688
    samples = rcps.samples_to_target(2688, interval)
    assert samples == 22 * interval and samples * 2048 == 1_211_105_280  # the tokens all its runs trained


def test_batch_outside_the_reference_points_is_a_usage_error(rcps):
    with pytest.raises(UsageError, match=r"cover only global batch sizes 1536 to 8192; choose --gbs there, "
                                         r"or give --tokens N to set the tokens to train"):
        rcps.units_needed(1024)


def test_own_members_converge_where_their_reference_runs_reached_the_target(monkeypatch):
    cost = cost_model("gpt3-mini")
    target = cost.spec.quality[0]  # curves placed around the recorded target, whatever it is
    t = target.threshold
    def row(time_s: float, units: int, loss: float) -> list:  # an evidence row: [time_s, samples, units, metrics]
        return [time_s, round(units / cost.units_per_sample), units, {target.metric: loss}]

    evals = [[row(1.0, 98304, t + 0.8), row(2.0, 196608, t - 0.01)], [row(1.0, 98304, t - 0.1)],
             [row(1.0, 98304, t + 0.4), row(2.0, 196608, t - 0.02)]]
    monkeypatch.setattr(gpt3_cost, "target_evidence", lambda name: {"runs": [{"evals": e} for e in evals]})
    model = load_convergence(cost, lambda: pytest.fail("no MLPerf data needed"))
    expected = sorted(next(units for _, _, units, m in run if m[target.metric] <= t) for run in evals)[1]
    assert model.points == ((cost.reference_batch_size, expected),)
    with pytest.raises(UsageError, match=f"cover only global batch size {cost.reference_batch_size}"):
        model.units_needed(cost.reference_batch_size * 2)


def test_members_without_convergence_data_ask_for_tokens():
    with pytest.raises(UsageError, match="no convergence data for gpt3-1.3b.*give --tokens N"):
        load_convergence(cost_model("gpt3-1.3b"), lambda: pytest.fail("no MLPerf data needed"))
