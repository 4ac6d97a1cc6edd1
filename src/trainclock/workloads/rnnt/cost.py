"""The planner's cost model of an RNN-T member (workload/cost_model.py says how the planner uses it).

An LSTM network trained data parallel: one "layer" holding every parameter (no pipeline cut, no
tensor-parallel split), all FLOPs in `weights` (the LSTMs' and the joint's matrix products, for an
utterance of the training set's mean duration and transcript length: spec.flops_per_sample).
Progress is in epochs (one utterance is 1/train_utterances of one). Activations kept for backward,
per utterance: each LSTM layer's gates, cell and output per frame (6 x hidden), the stacked
input, and the two lattice log-probabilities per (frame, piece) point (the chunked joint's full
logits are recomputed, not kept), in 16-bit values. LAMB keeps two fp32 moments per parameter, and
the EMA one more copy.

Convergence: rnnt-librispeech from MLPerf's reference convergence points (rcps_rnnt.json, epochs to
target by batch size); the CPU tiers from the epochs at which each recorded reference run
(targets/<member>.json) first reached the target, at the spec's batch size."""

from __future__ import annotations

from dataclasses import dataclass

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops, WorkloadCost
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.rnnt.spec import MEMBERS, MLPERF_ROUND, RnntSpec, get_member

LAMB_EMA_STATE_BYTES = 12  # LAMB's two fp32 moments and the fp32 weight average (a model buffer, counted here)


def run_progress(spec: RnntSpec, samples_per_epoch: int | None = None) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike. `samples_per_epoch`: the training set's own
    size, where the job counts it from its data (default: the spec's)."""
    # the rnnt logs count eval_accuracy's epoch_num in epochs
    return Progress(unit="utterances", units_per_sample=1, log_key="epoch_num", log_in="epochs",
                    samples_per_epoch=samples_per_epoch or spec.train_utterances)


@dataclass(frozen=True)
class RnntCost(SpecCost):
    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: RnntSpec

    @property
    def parameter_count(self) -> int:
        return self.spec.parameter_count()

    layers = 1
    other_parameters = 0.0
    tensor_parallel_units = 1
    tensor_parallel_unit = "whole networks (data parallel only)"
    boundary_values_per_sample = 0.0
    tp_collectives_per_layer = 0
    optimizer_state_bytes_per_parameter = LAMB_EMA_STATE_BYTES

    spec_progress = staticmethod(run_progress)

    @property
    def sample_noun(self) -> str:
        return f"utterances of {self.spec.mean_duration:g} s"

    @property
    def layer_parameters(self) -> float:
        return float(self.parameter_count)

    @property
    def flops_per_sample(self) -> SampleFlops:
        return SampleFlops(weights=self.spec.flops_per_sample())

    @property
    def eval_samples(self) -> int:
        return self.spec.eval_utterances

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        s, c = self.spec, self.spec.model
        frames = s.mean_duration * 100 / s.features.subsampling
        values = (frames * (c.in_features + 6 * c.enc_hidden * c.enc_pre_layers)
                  + frames / c.stack_time * 6 * c.enc_hidden * c.enc_post_layers
                  + (s.mean_pieces + 1) * 6 * c.pred_hidden * c.pred_layers
                  + frames / c.stack_time * (s.mean_pieces + 1) * 2)
        return 2.0 * micro_batch * values

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)

    @property
    def units_per_progress(self) -> float:
        return self.spec.train_utterances  # the runs record utterances, the rules count epochs


def cost_model(member: str) -> WorkloadCost:
    """The cost model of an RNN-T member (names as get_member takes them); UsageError if unknown."""
    return RnntCost(get_member(member))
