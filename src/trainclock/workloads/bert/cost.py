"""The planner's cost model of a BERT member (workload/cost_model.py says how the planner uses it).

An encoder layer is a GPT layer without the causal mask, so its activations are the same
Korthikanti et al. 2022 terms (workload.cost_model.transformer_layer_activation_bytes). The masked-LM head runs on the masked positions only (the reference
gathers them), so its logits are small next to GPT's.

Convergence: bert-large from MLPerf's reference convergence points (rcps_bert.json, in samples);
the CPU tiers from the samples at which each recorded reference run first reached the target."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops, WorkloadCost, transformer_layer_activation_bytes
from trainclock.workload.spec_cost import LayerStackCost
from trainclock.workloads.bert.spec import MEMBERS, MLPERF_ROUND, BertSpec, get_member

LAMB_STATE_BYTES = 8  # two fp32 moments per parameter
LOGIT_BYTES = 4 * 2  # fp32 logits and their gradient


def run_progress(spec: BertSpec) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike."""
    # MLPerf bert counts progress in samples, logged under epoch_num (train_samples, eval_accuracy)
    return Progress(unit="samples", units_per_sample=1, log_key="epoch_num", log_in="samples")


@dataclass(frozen=True)
class BertCost(LayerStackCost):
    """Beside the encoder layers: embeddings, pooler and the pre-training heads."""

    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: BertSpec

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

    spec_progress = staticmethod(run_progress)

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


def cost_model(member: str) -> WorkloadCost:
    """The cost model of a BERT member; UsageError if unknown."""
    return BertCost(get_member(member))
