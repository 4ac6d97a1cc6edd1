"""The planner's cost model of a BERT member (workload/cost_model.py says how the planner uses it).

An encoder layer is a GPT layer without the causal mask, so its activations are the same
Korthikanti et al. 2022 terms (workloads.cost.transformer_layer_activation_bytes). The masked-LM head runs on the masked positions only (the reference
gathers them), so its logits are small next to GPT's.

Convergence: bert-large from MLPerf's reference convergence points (rcps_bert.json, in samples);
the CPU tiers from the samples at which each recorded reference run first reached the target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from trainclock.workload import evidence
from trainclock.workload.base import QualityTarget
from trainclock.workloads.bert.metric import METRIC
from trainclock.workloads.bert.spec import MEMBERS, MLPERF_ROUND, BertSpec, get_member, target_evidence
from trainclock.workload.cost_model import (ConvergencePoints, SampleFlops, SpecCost, WorkloadCost, rcp_convergence,
                                      transformer_layer_activation_bytes)

LAMB_STATE_BYTES = 8  # two fp32 moments per parameter
LOGIT_BYTES = 4 * 2  # fp32 logits and their gradient


@dataclass(frozen=True)
class BertCost(SpecCost):
    mlperf_round = MLPERF_ROUND

    spec: BertSpec

    @cached_property
    def parameter_count(self) -> int:
        return self.spec.shape.parameter_count()

    @property
    def layers(self) -> int:
        return self.spec.shape.n_layer

    @cached_property
    def other_parameters(self) -> int:
        """Embeddings, pooler and the pre-training heads: everything but the encoder layers."""
        return replace(self.spec.shape, n_layer=0).parameter_count()

    @cached_property
    def layer_parameters(self) -> float:
        return (self.parameter_count - self.other_parameters) / self.layers

    @property
    def tensor_parallel_units(self) -> int:
        return self.spec.shape.n_head

    tensor_parallel_unit = "attention heads"

    @cached_property
    def flops_per_sample(self) -> SampleFlops:
        """BertShape.flops_per_sample is linear in the attention term 4*s*h per token and layer:
        training (x3) the scores and weighted sum are 12*L*s^2*h per sequence, the rest is weights."""
        spec, shape = self.spec, self.spec.shape
        total = shape.flops_per_sample(spec.seq_len, spec.max_predictions)
        attention = 3.0 * shape.n_layer * 4 * spec.seq_len * shape.hidden * spec.seq_len
        return SampleFlops(weights=total - attention, other=attention)

    @property
    def boundary_values_per_sample(self) -> float:
        return self.spec.seq_len * self.spec.shape.hidden

    optimizer_state_bytes_per_parameter = LAMB_STATE_BYTES
    progress_unit = "samples"  # MLPerf bert logs train_samples and eval epoch_num in samples
    units_per_sample = 1

    @property
    def sample_noun(self) -> str:
        return f"sequences of {self.spec.seq_len} tokens"

    @property
    def eval_samples(self) -> int:
        return self.spec.eval_samples

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        shape = self.spec.shape
        return transformer_layer_activation_bytes(self.spec.seq_len, micro_batch, shape.hidden, shape.n_head, tp,
                                                  sequence_parallel, recompute)

    def output_bytes(self, micro_batch: int, tp: int) -> float:
        return micro_batch * self.spec.max_predictions * self.spec.shape.vocab_size * LOGIT_BYTES / tp

    def convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints | None:
        spec = self.spec
        if spec.target_source.startswith("mlperf"):
            return rcp_convergence(mlperf_dir(), spec.mlperf_benchmark, MLPERF_ROUND)
        if not spec.target_source.startswith("measured"):
            return None
        quality = (QualityTarget(METRIC, spec.target_accuracy, "higher"),)
        return evidence.convergence(spec.name, target_evidence(spec.name).get("runs") or [], quality,
                                    spec.global_batch_size)

    def measured_efficiency(self) -> tuple[float, str] | None:
        measured = [s.name for s in MEMBERS.values() if s.target_source.startswith("measured")]
        return evidence.efficiency(self.name, {name: target_evidence(name) for name in measured})


def cost_model(member: str) -> WorkloadCost:
    """The cost model of a BERT member; UsageError if unknown."""
    return BertCost(get_member(member))
