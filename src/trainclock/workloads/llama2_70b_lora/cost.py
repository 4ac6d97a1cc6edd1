"""The planner's cost model of a llama2_70b_lora member (workload/cost_model.py says how the planner uses it).

A Llama decoder: `layers` identical decoder layers (pipeline cut), query heads as the tensor-parallel
unit, Megatron's two all-reduces per layer. Training FLOPs per sequence: the frozen base's matmuls
forward and backward through activations only (4N per token, no weight gradients; the adapters'
are negligible) plus attention (12*L*D*T per token). Activations: a transformer layer's
(Korthikanti et al.), the backward still runs through every frozen layer.

Only the adapters train (`trained_parameter_count`): the planner charges gradients, fp32 master
weights, Adam moments, the optimizer update and the gradient all-reduce for them alone, and only
the weights of the frozen 69B base.

Convergence: the full size from the round's reference convergence points (rcps_llama2_70b_lora.json,
samples to target by batch size); a CPU tier from its recorded reference runs."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import (ConvergencePoints, SampleFlops, WorkloadCost, rules_rcp_table,
                                            transformer_layer_activation_bytes)
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.llama2_70b_lora.spec import BENCHMARK, MEMBERS, MLPERF_ROUND, LoraSpec, get_member

ADAM_STATE_BYTES = 8  # two fp32 moments per trained parameter


def run_progress(spec: LoraSpec) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike."""
    # the rules count progress in training samples (sequences), logged as samples_count
    return Progress(unit="sequences", units_per_sample=1, log_key="samples_count", log_in="samples")


@dataclass(frozen=True)
class LoraCost(SpecCost):
    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: LoraSpec

    @property
    def parameter_count(self) -> int:
        return self.spec.shape.parameter_count() + self.spec.trainable_parameter_count()

    @property
    def layers(self) -> int:
        return self.spec.shape.n_layer

    @property
    def layer_parameters(self) -> float:
        return self.spec.shape.layer_parameter_count() + self.spec.trainable_parameter_count() / self.layers

    @property
    def other_parameters(self) -> float:
        s = self.spec.shape
        return 2 * s.vocab_size * s.d_model + s.d_model

    @property
    def tensor_parallel_units(self) -> int:
        return self.spec.shape.n_kv_head  # a rank needs whole key/value groups

    tensor_parallel_unit = "key/value head groups"

    @property
    def trained_parameter_count(self) -> int:
        return self.spec.trainable_parameter_count()

    optimizer_state_bytes_per_parameter = float(ADAM_STATE_BYTES)

    spec_progress = staticmethod(run_progress)

    @property
    def sample_noun(self) -> str:
        return f"sequences of {self.spec.seq_len} tokens"

    @property
    def flops_per_sample(self) -> SampleFlops:
        s = self.spec
        attention = 12 * s.shape.n_layer * s.shape.d_model * s.seq_len * s.seq_len
        return SampleFlops(weights=s.flops_per_token() * s.seq_len - attention, other=attention)

    @property
    def boundary_values_per_sample(self) -> float:
        return float(self.spec.seq_len * self.spec.shape.d_model)

    @property
    def eval_samples(self) -> int:
        return self.spec.eval_sequences

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        s = self.spec.shape
        return transformer_layer_activation_bytes(self.spec.seq_len, micro_batch, s.d_model, s.n_head, tp,
                                                  sequence_parallel, recompute)

    def output_bytes(self, micro_batch: int, tp: int) -> float:
        return micro_batch * self.spec.seq_len * self.spec.shape.vocab_size * 4 * 2 / tp  # fp32 logits and gradient

    def rules_convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints:
        # the round's own table, as the rules package ships it: its unit is "samples to converge"
        table = rules_rcp_table(BENCHMARK, MLPERF_ROUND)
        points = sorted((int(e["BS"]), statistics.fmean(e["samples to converge"])) for e in table)
        return ConvergencePoints(tuple(points), f"MLPerf RCPs training_{MLPERF_ROUND}.0")


def cost_model(member: str) -> WorkloadCost:
    """The cost model of a llama2_70b_lora member (names as get_member takes them); UsageError if unknown."""
    return LoraCost(get_member(member))
