import pytest

from trainclock.errors import UsageError
from trainclock.planner.model import search
from trainclock.planner.model.feasibility import layout_problems
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.step_time import Efficiency

EFF = Efficiency(0.45, eval_overhead_s=2.0)
TEMPLATE = Plan(sequence_parallel=True, recompute="selective", zero=1, overlap=True, precision="fp8")


@pytest.fixture(scope="module")
def found(data, catalogue):
    return search.search(data.cost, catalogue["h100-sxm"], 3584, EFF, TEMPLATE, {}, 2688, data.convergence)


def test_search_ranks_valid_layouts_that_fit_fastest_first(found, data):
    assert len(found.ranked) > 10 and found.rejected["memory"] > 0
    times = [p.time_to_train_s for p in found.ranked]
    assert times == sorted(times)
    for p in found.ranked:
        assert p.memory.fits and p.plan.accelerators == 3584
        assert layout_problems(p.plan, data.cost, 3584, 2688) == []
    assert found.considered == len(found.ranked) + sum(found.rejected.values())


def test_nvidias_layout_is_among_the_candidates_and_near_the_best(found):
    nvidia = [p for p in found.ranked if (p.plan.layout.tp, p.plan.layout.pp, p.plan.layout.vp, p.plan.micro_batch,
                                          p.plan.recompute, p.plan.zero) == (4, 8, 12, 1, "selective", 1)]
    assert len(nvidia) == 1
    assert nvidia[0].time_to_train_s <= 1.05 * found.ranked[0].time_to_train_s


def test_without_a_batch_the_search_tries_one_per_convergence_point(data, catalogue):
    result = search.search(data.cost, catalogue["h100-sxm"], 3584, EFF, TEMPLATE,
                           {"tp": 4, "pp": 8, "vp": 12, "micro_batch": 1, "recompute": "selective", "zero": 1},
                           None, data.convergence)
    batches = sorted(p.global_batch_size for p in result.ranked)
    # multiples of dp x pp = 112 x 8 = 896 at or above 1536, 2048, 3072, 4096, and below 8192 at the top
    assert batches == [1792, 2688, 3584, 4480, 8064]


def test_nothing_fits_is_a_one_line_error_with_the_numbers(data, catalogue):
    result = search.search(data.cost, catalogue["a100-80gb"], 8, EFF, Plan(precision="bf16"), {}, 1536, data.convergence)
    with pytest.raises(UsageError, match=r"no layout of gpt3-175b on 8 x a100-80gb fits in memory: the smallest needs "
                                         r"[\d,.]+ GB per accelerator of 72.0 GB usable") as info:
        search.require_some(result, data.cost, catalogue["a100-80gb"], 8, 1536)
    assert "\n" not in str(info.value)


def test_a_data_parallel_plan_may_train_each_replicas_whole_share_at_once(catalogue, mlperf_dir):
    from trainclock.planner.model.convergence import load_convergence
    from trainclock.planner.model.workload_view import cost_model

    cost = cost_model("resnet")
    found = search.search(cost, catalogue["h100-sxm"], 16, Efficiency(0.3), Plan(recompute="none", zero=0),
                          {"tp": 1, "pp": 1, "zero": 0}, 3328, load_convergence(cost, lambda: mlperf_dir))
    shares = {p.plan.micro_batch for p in found.ranked}
    assert 3328 // 16 in shares and set(cost.micro_batch_choices) & shares
    # no gradient accumulation: the gradients' reduction overlaps the whole backward, so it ranks first
    assert found.ranked[0].plan.micro_batch == 3328 // 16 and found.ranked[0].step.micro_batches == 1
