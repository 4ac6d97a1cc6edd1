"""Model-parallel parameters (sharded embedding tables) in the planner, by hand on round numbers:
memory divides them over every device with only the touched rows' gradients, the data-parallel
traffic and the optimizer update leave them out (the update is sparse), the all-to-all exchange
is charged forward and backward, and a cost model without them plans exactly as before."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from trainclock.planner.model.memory import memory_per_accelerator
from trainclock.planner.model.search import search
from trainclock.planner.model.step_time import Efficiency, micro_batch_times, optimizer_seconds, step_time
from trainclock.workload.cost_model import SampleFlops, WorkloadCost

from .helpers import accelerator, plan

EFF = Efficiency(compute=0.5)


@dataclass(frozen=True)
class Tables(WorkloadCost):
    """1M dense parameters beside 1B of tables; each sample pools 10 rows of 100 values from 20 tables."""

    sharded: float = 1e9
    name: str = "tables"
    benchmark: str = "tables"
    parameter_count: int = 1_001_000_000
    layers: int = 1
    layer_parameters: float = 1e6
    other_parameters: float = 1e9
    tensor_parallel_units: int = 1
    tensor_parallel_unit: str = "units"
    flops_per_sample: SampleFlops = SampleFlops(weights=6e6)
    boundary_values_per_sample: float = 2100
    optimizer_state_bytes_per_parameter: float = 4
    progress_unit: str = "samples"
    units_per_sample: float = 1.0
    sample_noun: str = "samples"
    reference_batch_size: int = 8192
    eval_every_samples: int = 8192
    eval_samples: int = 8192

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        return 0.0

    @property
    def sharded_parameters(self) -> float:
        return self.sharded

    @property
    def sharded_parameters_touched_per_sample(self) -> float | None:
        return 1000.0 if self.sharded else None

    @property
    def exchange_values_per_sample(self) -> float:
        return 2000.0 if self.sharded else 0.0

    micro_batch_choices = (1024,)


def test_memory_divides_the_tables_over_every_device_and_keeps_only_touched_gradients():
    m = memory_per_accelerator(Tables(), 8192, plan(dp=8, micro_batch=1024, precision="fp32", zero=0), accelerator())
    own = 1e9 / 8
    assert m.weights == pytest.approx((1e6 + own) * 4)
    assert m.optimizer == pytest.approx((1e6 + own) * 4)  # Adagrad's one fp32 state
    assert m.gradients == pytest.approx((1e6 + 8192 * 1000 / 8) * 4)  # the dense grads + the rows touched
    assert m.sharded == pytest.approx(own * 8 + 8192 * 1000 / 8 * 4)
    unsharded = memory_per_accelerator(Tables(sharded=0.0), 8192, plan(dp=8, micro_batch=1024, precision="fp32", zero=0),
                                       accelerator())
    assert unsharded.weights == pytest.approx(1.001e9 * 4) and unsharded.sharded == 0.0


def test_step_charges_the_exchange_and_leaves_tables_out_of_data_parallel_traffic():
    p = plan(dp=8, micro_batch=1024, precision="fp32", zero=0)
    sharded, replicated = step_time(Tables(), 8192, p, accelerator(), EFF), step_time(Tables(sharded=0.0), 8192, p, accelerator(), EFF)
    # all-to-all: 7/8 of 1024 x 2000 fp32 values over 80 GB/s (100 GB/s at 80%), forward and backward
    one_way = 7 / 8 * 1024 * 2000 * 4 / 80e9
    assert micro_batch_times(Tables(), p, accelerator(), EFF).exchange == pytest.approx(one_way)
    assert sharded.exchange_s == pytest.approx(2 * one_way) and replicated.exchange_s == 0.0
    assert ("embedding all-to-all (forward and backward)", sharded.exchange_s) in sharded.rows()
    assert sum(s for _, s in sharded.rows()) == pytest.approx(sharded.step_s)
    # a ring all-reduce of the 1M dense fp32 gradients only, against all 1.001B
    assert sharded.dp_comm_s == pytest.approx(2 * 7 / 8 * 4e6 / 80e9)
    assert replicated.dp_comm_s == pytest.approx(2 * 7 / 8 * 4.004e9 / 80e9)
    # Adagrad in fp32 reads and writes 4 + 8 + 8 bytes per parameter it updates: the dense ones and the touched rows
    assert optimizer_seconds(Tables(), p, accelerator(), 8192) == pytest.approx((1e6 + 8192 * 1000 / 8) * 20 / 1e12)
    assert sharded.step_s < replicated.step_s / 10


def test_search_keeps_a_sharded_model_in_ddp_with_its_micro_batches():
    found = search(Tables(), accelerator(), 8, EFF, plan(precision="bf16", zero=1, overlap=True), {}, 8192, None, units=8192 * 10)
    assert found.ranked and {(p.plan.zero, p.plan.micro_batch) for p in found.ranked} == {(0, 1024)}
