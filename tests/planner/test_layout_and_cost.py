import pytest

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.planner.model.feasibility import layout_problems, require_valid
from trainclock.planner.model.parallel_plan import complete, parse_layout
from trainclock.planner.model.predict import predict
from trainclock.planner.model.run_cost import HOURS_PER_MONTH, parse_price, run_cost
from trainclock.planner.model.step_time import Efficiency
from trainclock.planner.model.workload_view import cost_model

from .helpers import accelerator, plan

COST = cost_model("gpt3-175b")


def test_layout_string_round_trips():
    p = plan(tp=4, pp=8, dp=112, vp=12, sequence_parallel=True, precision="fp8")
    assert complete(plan(), parse_layout(p.describe()), 3584) == p
    assert parse_layout("tp=4, pp=8,sp") == {"tp": 4, "pp": 8, "sequence_parallel": True}


def test_the_plan_holds_the_layout_trainclock_run_takes():
    p = plan(tp=4, pp=8, dp=112, vp=12, zero=3)
    assert p.layout == Layout.for_world(3584, tp=4, pp=8, fsdp=True, vp=12)  # zero 3 is FSDP, vp > 1 interleaves
    assert p.layout.pp_schedule == "interleaved-1f1b" and p.accelerators == 3584
    assert plan(pp=4, zero=1).layout == Layout(pp=4)  # 1F1B with DDP


def test_data_parallelism_fills_the_remaining_accelerators():
    p = complete(plan(sequence_parallel=True), {"tp": 4, "pp": 8}, 3584)
    assert (p.layout.dp, p.sequence_parallel) == (112, True)
    assert complete(plan(sequence_parallel=True), {}, 8).sequence_parallel is False  # tp 1: nothing to shard
    with pytest.raises(UsageError, match="3584 accelerators cannot be split into tp=5 x pp=1"):
        complete(plan(), {"tp": 5}, 3584)


@pytest.mark.parametrize("text, message", [
    ("tp4", "unknown --layout key 'tp4'"),
    ("tp=four", "tp must be a whole number"),
    ("tp=4,tp=8", "sets tp twice"),
    ("zero=5", "zero must be 0, 1, 2 or 3"),
    ("recompute=some", "choose one of none, selective, full"),
    ("precision=int8", "choose one of fp8, bf16, fp32"),
    ("overlap=maybe", "write overlap=on or overlap=off"),
])
def test_bad_layout_strings_are_one_line_usage_errors(text, message):
    with pytest.raises(UsageError, match=message):
        parse_layout(text)


def test_layout_constraints():
    ok = plan(tp=4, pp=8, dp=112, vp=12, sequence_parallel=True)
    assert layout_problems(ok, COST, 3584, 2688) == []
    assert layout_problems(ok, COST, 3584, 2700)[0].startswith("batch:")
    assert layout_problems(plan(tp=5, pp=1, dp=1), COST, 5, 5)[0] == \
        "tensor parallel: tp=5 does not divide gpt3-175b's 96 attention heads"
    assert layout_problems(plan(pp=5, dp=1), COST, 5, 5)[0].startswith("layers:")
    # interleaving runs micro-batches in groups of pp: 2688 / 336 = 8 per step is fine, 4 is not
    assert layout_problems(plan(tp=4, pp=8, dp=336, vp=12), COST, 10752, 2688) == []
    assert layout_problems(plan(tp=4, pp=8, dp=336, vp=12), COST, 10752, 1344)[0].startswith("interleaving:")
    with pytest.raises(UsageError, match=r"is not valid \(batch: global batch 2700"):
        require_valid(ok, COST, 3584, 2700)


def test_price_per_node_month_becomes_per_accelerator_hour():
    acc = accelerator()  # 8 per node
    assert parse_price("$37,000/node-month", acc).per_accelerator_hour == pytest.approx(37000 / HOURS_PER_MONTH / 8)
    assert parse_price("2.5/gpu-hour", acc).per_accelerator_hour == 2.5
    assert parse_price("20/node-hour", acc).per_accelerator_hour == 2.5
    for bad in ("37000", "37000/node-year", "-3/gpu-hour", "0/gpu-hour"):
        with pytest.raises(UsageError, match="--price"):
            parse_price(bad, acc)


def test_cost_and_energy_of_a_run():
    acc = accelerator(power_watts=500.0)
    p = predict(cost_model("gpt3-125m"), acc, 256, plan(dp=8), Efficiency(0.4), units=10**9)
    hours = p.time_to_train_s / 3600
    cost = run_cost(p, parse_price("37000/node-month", acc))
    assert cost.accelerator_hours == pytest.approx(8 * hours)
    assert cost.per_run == pytest.approx(8 * hours * 37000 / HOURS_PER_MONTH / 8)
    assert cost.per_result == pytest.approx(3 * cost.per_run)  # an MLPerf gpt3 result is 3 runs
    assert cost.energy_kwh == pytest.approx(8 * hours * 0.5)
    assert run_cost(p, None).per_run is None
