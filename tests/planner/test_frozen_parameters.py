"""Frozen parameters (a LoRA fine-tune's base weights) in the planner, by hand on round numbers:
they keep their weights at the plan's precision but no gradients, master weights nor optimizer
states, add no data-parallel gradient traffic nor update, and a cost model that trains every
parameter plans exactly as before."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from trainclock.planner.model.memory import memory_per_accelerator, trained_share
from trainclock.planner.model.step_time import Efficiency, optimizer_seconds, step_time
from trainclock.workload.cost_model import SampleFlops, WorkloadCost

from .helpers import accelerator, plan

EFF = Efficiency(compute=0.5)


@dataclass(frozen=True)
class Adapted(WorkloadCost):
    """1B parameters in 10 layers, of which `trained` train (Adam: 8 bytes of state each)."""

    trained: int = 1_000_000_000
    name: str = "adapted"
    benchmark: str = "adapted"
    parameter_count: int = 1_000_000_000
    layers: int = 10
    layer_parameters: float = 1e8
    other_parameters: float = 0.0
    tensor_parallel_units: int = 8
    tensor_parallel_unit: str = "heads"
    flops_per_sample: SampleFlops = SampleFlops(weights=6e9)
    boundary_values_per_sample: float = 1000
    optimizer_state_bytes_per_parameter: float = 8
    progress_unit: str = "samples"
    units_per_sample: float = 1.0
    sample_noun: str = "samples"
    reference_batch_size: int = 64
    eval_every_samples: int = 64
    eval_samples: int = 64

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        return 0.0

    @property
    def trained_parameter_count(self) -> int:
        return self.trained


FULL, LORA = Adapted(), Adapted(trained=10_000_000)  # LoRA: 1% of the parameters train


def test_a_model_that_trains_everything_has_a_trained_share_of_one():
    assert trained_share(FULL) == 1.0 and trained_share(LORA) == pytest.approx(0.01)


def test_frozen_parameters_keep_only_their_weights():
    p = plan(dp=8, micro_batch=8, precision="bf16", zero=1)
    full, lora = (memory_per_accelerator(c, 64, p, accelerator()) for c in (FULL, LORA))
    assert lora.weights == full.weights == pytest.approx(1e9 * 2)  # bf16 weights, frozen or not
    assert full.gradients == pytest.approx(1e9 * 4) and lora.gradients == pytest.approx(1e7 * 4)  # fp32 main_grad
    # fp32 master + Adam's 8 bytes, split over the 8 replicas by ZeRO-1
    assert full.optimizer == pytest.approx(1e9 * 12 / 8) and lora.optimizer == pytest.approx(1e7 * 12 / 8)
    assert lora.total < full.total


def test_fp8_frozen_weights_cost_what_the_plan_keeps_per_weight():
    p = plan(dp=8, micro_batch=8, precision="fp8", zero=1)
    assert memory_per_accelerator(LORA, 64, p, accelerator()).weights == pytest.approx(1e9 * 4)  # bf16 + fp8 copy


def test_frozen_parameters_add_no_gradient_reduction_nor_update():
    p = plan(dp=8, micro_batch=8, precision="bf16", zero=0, overlap=False)
    full, lora = (step_time(c, 64, p, accelerator(), EFF) for c in (FULL, LORA))
    assert lora.dp_comm_s == pytest.approx(full.dp_comm_s / 100)  # no latency on the round accelerator
    assert optimizer_seconds(LORA, p, accelerator()) == pytest.approx(optimizer_seconds(FULL, p, accelerator()) / 100)
    assert lora.step_s < full.step_s
    assert lora.compute_s == full.compute_s  # the forward and backward still run through every layer


def test_fsdp_still_gathers_the_frozen_weights():
    p = plan(dp=8, micro_batch=8, precision="bf16", zero=3, overlap=False)
    full, lora = (step_time(c, 64, p, accelerator(), EFF) for c in (FULL, LORA))
    # per micro-batch: two all-gathers of every weight, one reduce-scatter of the trained gradients
    assert lora.dp_comm_s == pytest.approx(full.dp_comm_s * (2 + 0.01) / 3)
