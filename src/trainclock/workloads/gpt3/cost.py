"""The planner's cost model of a GPT-3 member (workload/cost_model.py says how the planner uses it).

FLOPs and parameters come from GPTShape's own formulas (model.py) rather than written again here.
Activations per layer follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", Table 2), as workload.cost_model.transformer_layer_activation_bytes gives them.

Convergence: gpt3-175b from MLPerf's reference convergence points (rcps_gpt3.json); trainclock's
measured members from the tokens at which each recorded reference run (targets/<member>.json)
first reached the target, at the spec's batch size."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops, WorkloadCost, transformer_layer_activation_bytes
from trainclock.workload.spec_cost import LayerStackCost
from trainclock.workloads.gpt3.spec import MEMBERS, MLPERF_ROUND, GPT3Spec, get_member, target_evidence

LOGIT_BYTES = 4 * 2  # fp32 logits and their gradient, per vocabulary entry and token
ADAM_STATE_BYTES = 8  # two fp32 moments per parameter


def run_progress(spec: GPT3Spec) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike."""
    # MLPerf gpt3 counts progress (epoch_num, train_samples) in tokens
    return Progress(unit="tokens", units_per_sample=spec.seq_len, log_key="epoch_num", log_in="units")


@dataclass(frozen=True)
class GPT3Cost(LayerStackCost):
    """Beside the layers: token and position embeddings and the final LayerNorm. Both pipeline ends
    hold the tied embedding (the first to look tokens up, the last for the logits)."""

    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: GPT3Spec

    @property
    def tensor_parallel_units(self) -> int:
        return self.spec.shape.n_head  # Megatron splits attention by whole heads

    tensor_parallel_unit = "attention heads"

    @cached_property
    def flops_per_sample(self) -> SampleFlops:
        """flops_per_token is 6N + 12*L*D*T, linear in T, so f(2T) - f(T) is the attention term
        (scores and weighted sum) and the rest is 6N, the matmuls with weights."""
        shape, seq = self.spec.shape, self.spec.seq_len
        per_token = shape.flops_per_token(seq)
        attention = shape.flops_per_token(2 * seq) - per_token
        return SampleFlops(weights=(per_token - attention) * seq, other=attention * seq)

    @property
    def boundary_values_per_sample(self) -> float:
        return self.spec.seq_len * self.spec.shape.d_model

    optimizer_state_bytes_per_parameter = ADAM_STATE_BYTES

    spec_progress = staticmethod(run_progress)

    @property
    def sample_noun(self) -> str:
        return f"sequences of {self.spec.seq_len} tokens"

    @property
    def eval_samples(self) -> int:
        return self.spec.eval_sequences

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        shape = self.spec.shape
        return transformer_layer_activation_bytes(self.spec.seq_len, micro_batch, shape.d_model, shape.n_head, tp,
                                                  sequence_parallel, recompute)

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        # "none" keeps the T^2 attention scores: never faster where it fits, so not worth searching
        return ("selective", "full")

    def output_bytes(self, micro_batch: int, tp: int) -> float:
        return micro_batch * self.spec.seq_len * self.spec.shape.vocab_size * LOGIT_BYTES / tp

    def target_evidence(self, name: str) -> dict:
        # through this module's name, which the planner's tests replace with made-up runs
        return target_evidence(name)


def cost_model(member: str) -> WorkloadCost:
    """The cost model of a GPT-3 member (names as get_member takes them); UsageError if unknown."""
    return GPT3Cost(get_member(member))

