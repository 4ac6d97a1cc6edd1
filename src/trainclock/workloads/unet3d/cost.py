"""The planner's cost model of a 3D U-Net member (workload/cost_model.py says how the planner uses it).

A convolutional network trained data parallel: one "layer" holding every parameter (no pipeline
cut, no tensor-parallel split), all FLOPs in `weights` (convolutions), samples (128^3 patches) as
the progress unit, as the unet3d logs count epoch_num. Activations: every convolution block keeps
its convolution and normalisation outputs (ReLU runs in place), each up level its transposed-conv
output and the concatenation, per voxel of its level (1/8 per level down), in 16-bit values.
Momentum SGD keeps one fp32 buffer per parameter.

Convergence: unet3d-kits19 from MLPerf's reference convergence points (rcps_unet3d.json, samples to
target by batch size); the CPU tiers from the samples at which each recorded reference run
(targets/<member>.json) first reached the target, at the spec's batch size."""

from __future__ import annotations

from dataclasses import dataclass

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops, WorkloadCost
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.unet3d.spec import MEMBERS, MLPERF_ROUND, Unet3DSpec, get_member

MOMENTUM_BYTES = 4  # one fp32 momentum buffer per parameter
BYTES_PER_VALUE = 2  # the planner's convention: 16-bit activations (it doubles them for fp32)


def activation_values_per_voxel(filters: tuple[int, ...], in_channels: int = 1) -> float:
    values = in_channels + 2 * 2 * filters[0]  # input, then two blocks of (conv, norm) outputs
    levels = list(filters) + [filters[-1]]
    for depth, (i, o) in enumerate(zip(levels[:-1], levels[1:]), start=1):
        values += 2 * 2 * o * 8.0 ** -depth  # the down level's two blocks
        values += (i + 2 * i + 2 * 2 * i) * 8.0 ** -(depth - 1)  # up: transposed output, concat, two blocks
    return values + 3  # the logits


def run_progress(spec: Unet3DSpec) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike."""
    # the v3.1 unet3d logs count eval_accuracy's epoch_num in samples (168 per KiTS19 epoch)
    return Progress(unit="samples", units_per_sample=1, log_key="epoch_num", log_in="samples")


@dataclass(frozen=True)
class Unet3DCost(SpecCost):
    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: Unet3DSpec

    @property
    def parameter_count(self) -> int:
        return self.spec.parameter_count()

    layers = 1  # no pipeline: the whole network is one unit
    other_parameters = 0.0

    @property
    def layer_parameters(self) -> float:
        return float(self.parameter_count)

    tensor_parallel_units = 1  # no tensor-parallel plan
    tensor_parallel_unit = "networks (no tensor-parallel split)"

    @property
    def flops_per_sample(self) -> SampleFlops:
        return SampleFlops(weights=self.spec.flops_per_sample())

    @property
    def boundary_values_per_sample(self) -> float:
        return float(self.spec.patch ** 3)  # never crossed (no pipeline, no TP): the input, for completeness

    optimizer_state_bytes_per_parameter = MOMENTUM_BYTES

    spec_progress = staticmethod(run_progress)

    @property
    def sample_noun(self) -> str:
        return f"patches of {self.spec.patch}^3 voxels"

    @property
    def eval_samples(self) -> int:
        return len(self.spec.eval_cases)

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        voxels = self.spec.patch ** 3
        if recompute == "full":
            return micro_batch * voxels * BYTES_PER_VALUE  # the input alone
        return micro_batch * voxels * activation_values_per_voxel(self.spec.filters) * BYTES_PER_VALUE

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)  # the run has no per-block recomputation for this network

    @property
    def tp_collectives_per_layer(self) -> int:
        return 0

    def measured_efficiency(self) -> tuple[float, str] | None:
        return self.own_efficiency()


def cost_model(member: str) -> WorkloadCost:
    """The cost model of a 3D U-Net member; UsageError if unknown."""
    return Unet3DCost(get_member(member))


