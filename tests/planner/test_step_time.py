import math

import pytest

from trainclock.planner.model import collectives as comm
from trainclock.planner.model.predict import predict
from trainclock.planner.model.step_time import Efficiency, eval_seconds, micro_batch_times, optimizer_seconds, step_time
from trainclock.planner.model.workload_view import cost_model
from trainclock.workload.cost_model import WorkloadCost

from .helpers import accelerator, plan

COST_175B = cost_model("gpt3-175b")
SMALL = cost_model("gpt3-125m")  # 12 layers, 12 heads, d_model 768, 2048 tokens per sequence


def test_gpt3_is_a_workload_cost_model():
    assert isinstance(COST_175B, WorkloadCost)
    assert (COST_175B.benchmark, COST_175B.progress_unit, COST_175B.units_per_sample) == ("gpt3", "tokens", 2048)
    assert cost_model("gpt3").name == "gpt3-175b"  # an MLPerf key alone means the full-size member


def test_175b_parameter_terms_by_hand():
    d, V, T = 12288, 50257, 2048
    assert COST_175B.layer_parameters == 12 * d * d + 13 * d == 1_812_099_072
    assert COST_175B.other_parameters == V * d + T * d + 2 * d == 642_748_416
    assert 96 * COST_175B.layer_parameters + COST_175B.other_parameters == COST_175B.parameter_count == 174_604_259_328


def test_flops_split_into_6N_and_attention_by_hand():
    n_without_positions = 174_604_259_328 - 2048 * 12288
    assert COST_175B.flops_per_sample.weights == 6 * n_without_positions * 2048
    assert COST_175B.flops_per_sample.other == 12 * 96 * 12288 * 2048 * 2048


def test_compute_time_is_6NT_flops_over_efficient_peak():
    layout = plan(recompute="none", zero=0, overlap=False, precision="bf16")
    acc = accelerator()
    mb = micro_batch_times(COST_175B, layout, acc, Efficiency(0.5))
    flops = 2048 * (6 * (174_604_259_328 - 2048 * 12288) + 12 * 96 * 12288 * 2048)  # one sequence
    assert mb.compute == pytest.approx(flops / (100e12 * 0.5))
    assert mb.backward == pytest.approx(2 * mb.forward)
    # fp8 doubles the speed of the weights' matmuls only; attention stays at bf16
    fp8 = micro_batch_times(COST_175B, plan(recompute="none", precision="fp8"), acc, Efficiency(0.5))
    expected = (COST_175B.flops_per_sample.weights / 200e12 + COST_175B.flops_per_sample.other / 100e12) / 0.5
    assert fp8.compute == pytest.approx(expected)


def test_full_recomputation_adds_a_forward_pass():
    acc, eff = accelerator(), Efficiency(0.5)
    none = micro_batch_times(COST_175B, plan(recompute="none"), acc, eff)
    full = micro_batch_times(COST_175B, plan(recompute="full"), acc, eff)
    assert full.compute == pytest.approx(none.compute * 4 / 3)
    assert full.recompute == pytest.approx(none.forward)


def test_mfu_equals_the_efficiency_when_nothing_but_compute_costs():
    acc = accelerator(memory_bandwidth=1e30)  # no optimizer time
    layout = plan(recompute="none", zero=0, overlap=False, precision="bf16")
    p = predict(SMALL, acc, 256, layout, Efficiency(0.37), units=10**9)
    assert p.mfu == pytest.approx(0.37, rel=1e-9)


@pytest.mark.parametrize("pp, vp, m", [(2, 1, 4), (4, 1, 8), (4, 3, 8), (2, 2, 16), (3, 1, 5)])
def test_bubble_fraction_is_p_minus_1_over_vm_plus_p_minus_1(pp, vp, m):
    layout = plan(pp=pp, vp=vp, recompute="none", zero=0, overlap=True)
    s = step_time(SMALL, m, layout, accelerator(), Efficiency(0.5))
    pipeline = s.compute_s + s.tp_comm_s + s.bubble_s
    assert s.micro_batches == m
    assert s.bubble_s / pipeline == pytest.approx((pp - 1) / (vp * m + pp - 1))


def test_ring_and_tree_all_reduce_by_hand():
    link = comm.Link(bandwidth=100e9, latency=5e-6)
    assert comm.ring_all_reduce_seconds(1e9, 8, link) == pytest.approx(2 * 7 / 8 * 1e9 / 100e9 + 14 * 5e-6)
    assert comm.tree_all_reduce_seconds(1e9, 8, link) == pytest.approx(2 * 1e9 / 100e9 + 2 * 3 * 5e-6)
    assert comm.all_reduce_seconds(1e9, 8, link) == comm.ring_all_reduce_seconds(1e9, 8, link)
    # a small buffer on many ranks: the ring's 2(n-1) latencies lose to the tree's 2 log2(n)
    assert comm.all_reduce_seconds(1e6, 1024, comm.Link(10e9, 10e-6)) == pytest.approx(2 * 1e6 / 10e9 + 20 * 10e-6)
    assert comm.ring_all_reduce_seconds(1e9, 1, link) == 0.0
    assert comm.reduce_scatter_seconds(1e9, 8, link) == pytest.approx(7 / 8 * 1e9 / 100e9 + 7 * 5e-6)


def test_groups_inside_a_node_use_its_fabric_and_others_the_network():
    acc = accelerator()
    assert comm.group_link(acc, (1, 8)).bandwidth == pytest.approx(100e9 * comm.LINK_EFFICIENCY)
    assert comm.group_link(acc, (4, 16)).bandwidth == pytest.approx(10e9 * comm.LINK_EFFICIENCY)


def test_an_all_to_all_sends_only_its_off_node_parts_over_the_network():
    acc = accelerator()  # 8 per node, 100 GB/s inside, 10 GB/s out, no latency
    fabric, network = 100e9 * comm.LINK_EFFICIENCY, 10e9 * comm.LINK_EFFICIENCY
    assert comm.group_all_to_all_seconds(8e9, acc, (1, 8)) == pytest.approx(7 / 8 * 8e9 / fabric)
    # 16 ranks on 2 nodes: 8/16 of the buffer leaves the node, 7/16 crosses it at the same time
    assert comm.group_all_to_all_seconds(8e9, acc, (1, 16)) == pytest.approx(8 / 16 * 8e9 / network)
    # a stride of 4: 2 of the group's ranks share each node
    assert comm.group_all_to_all_seconds(8e9, acc, (4, 16)) == pytest.approx(14 / 16 * 8e9 / network)


def test_overlap_helpers_by_hand():
    assert comm.exposed_after_ready([1, 2, 3], 0.5, compute_end=3) == pytest.approx(0.5)
    assert comm.exposed_after_ready([1, 2, 3], 2.0, compute_end=3) == pytest.approx(4.0)
    assert comm.delay_before_deadlines([0, 1, 2], 0.5) == pytest.approx(0.5)
    assert comm.delay_before_deadlines([1, 2, 3], 0.5) == 0.0


def test_data_parallel_traffic_is_a_ring_all_reduce_of_the_gradients_and_overlap_hides_most():
    acc = accelerator()
    base = plan(tp=1, pp=1, dp=16, recompute="none", zero=1, overlap=False)
    exposed_all = step_time(SMALL, 64, base, acc, Efficiency(0.5))
    shard_bytes = SMALL.parameter_count * 2  # bf16 gradients, one bucket per layer
    link = comm.group_link(acc, base.layout.group("dp"))
    assert exposed_all.dp_comm_s == pytest.approx(comm.ring_all_reduce_seconds(shard_bytes, 16, link))
    assert exposed_all.dp_exposed_s == exposed_all.dp_comm_s
    slow = Efficiency(0.02)  # a backward pass long against the traffic
    hidden = step_time(SMALL, 64, plan(tp=1, pp=1, dp=16, recompute="none", zero=1, overlap=True), acc, slow)
    # then only the last layer's reduce-scatter and the first layer's all-gather wait
    bucket = comm.reduce_scatter_seconds(shard_bytes / 12, 16, link)
    assert hidden.dp_exposed_s == pytest.approx(2 * bucket)
    fast = step_time(SMALL, 64, plan(tp=1, pp=1, dp=16, recompute="none", zero=1, overlap=True), acc, Efficiency(0.9))
    assert 2 * bucket < fast.dp_exposed_s < fast.dp_comm_s  # a quick backward hides only part

    # a weight all-gather run after the optimizer step waits whole: every layer's bucket, plus the
    # last gradient bucket that overlap could not hide
    after = step_time(SMALL, 64, plan(tp=1, pp=1, dp=16, recompute="none", zero=1, overlap=True,
                                      gather_overlap=False), acc, slow)
    assert after.dp_exposed_s == pytest.approx(bucket + 12 * bucket)
    assert after.dp_comm_s == hidden.dp_comm_s


def test_the_gather_overlap_is_a_layout_key():
    from trainclock.planner.model.parallel_plan import Plan, parse_layout

    given = parse_layout("tp=4,gather=off")
    assert given == {"tp": 4, "gather_overlap": False}
    assert "gather=off" in Plan(gather_overlap=False).describe() and "gather" not in Plan().describe()
    assert "ag-after" in Plan(gather_overlap=False).short()

def test_optimizer_is_memory_bound_on_the_parameters_it_owns():
    layout = plan(tp=2, pp=2, dp=4, zero=1)
    owned = SMALL.parameter_count / 4 / 4
    assert optimizer_seconds(SMALL, layout, accelerator()) == pytest.approx(owned * 30 / 1e12)  # Adam, mixed precision
    fp32 = plan(tp=2, pp=2, dp=4, zero=1, precision="fp32")
    assert optimizer_seconds(SMALL, fp32, accelerator()) == pytest.approx(owned * 28 / 1e12)  # no 16-bit copy


def test_evaluation_is_a_forward_pipeline_plus_the_fixed_overhead():
    layout = plan(dp=2, micro_batch=2, recompute="none", overlap=True)
    eff = Efficiency(0.5, eval_overhead_s=1.5)
    mb = micro_batch_times(SMALL, layout, accelerator(), eff)
    seconds = eval_seconds(SMALL, layout, accelerator(), eff)  # 5659 validation sequences
    assert seconds == pytest.approx(math.ceil(5659 / 4) * mb.forward + 1.5)


def test_an_all_reduce_across_nodes_reduces_inside_each_node_first_where_that_is_faster():
    acc = accelerator()  # 8 per node, 100 GB/s inside, 10 GB/s out, no latency
    fabric, network = comm.Link(100e9 * comm.LINK_EFFICIENCY, 0.0), comm.Link(10e9 * comm.LINK_EFFICIENCY, 0.0)
    # inside one node: the plain all-reduce over the fabric
    assert comm.group_all_reduce_seconds(8e9, acc, (1, 8)) == comm.all_reduce_seconds(8e9, 8, fabric)
    # 64 ranks on 8 nodes: reduce-scatter and all-gather over the fabric among the node's 8, and each
    # rank's eighth across the 8 nodes through its own port
    hierarchical = 2 * comm.reduce_scatter_seconds(8e9, 8, fabric) + comm.all_reduce_seconds(1e9, 8, network)
    assert comm.group_all_reduce_seconds(8e9, acc, (1, 64)) == pytest.approx(hierarchical)
    assert hierarchical < comm.all_reduce_seconds(8e9, 64, network)
    # a stride of 4 leaves 2 of the group's ranks on each node: each sends half across
    two = 2 * comm.reduce_scatter_seconds(8e9, 2, fabric) + comm.all_reduce_seconds(4e9, 8, network)
    assert comm.group_all_reduce_seconds(8e9, acc, (4, 16)) == pytest.approx(two)
    # one rank per node: nothing to gain inside, the flat all-reduce over the network
    assert comm.group_all_reduce_seconds(8e9, acc, (8, 8)) == pytest.approx(comm.all_reduce_seconds(8e9, 8, network))


def test_a_model_declared_as_one_block_leaves_its_gradients_in_buckets_by_size():
    from trainclock.planner.model.step_time import BUCKET_BYTES, gradient_buckets

    one_block = cost_model("resnet")
    assert one_block.layers == 1
    layout = plan(dp=8).layout
    assert gradient_buckets(one_block, layout, 10 * BUCKET_BYTES) == 10
    assert gradient_buckets(one_block, layout, BUCKET_BYTES / 2) == 1
    assert gradient_buckets(SMALL, layout, 10 * BUCKET_BYTES) == 12  # a layered model: one bucket per layer
    # so its reduction overlaps the backward: with a slow backward only the last bucket waits
    slow = step_time(one_block, 8 * 64, plan(dp=8, micro_batch=64, recompute="none", zero=0), accelerator(),
                     Efficiency(0.01))
    buckets = gradient_buckets(one_block, layout, one_block.parameter_count * 2)
    assert buckets > 1 and slow.dp_exposed_s == pytest.approx(slow.dp_comm_s / buckets)
