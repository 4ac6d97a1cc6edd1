"""The planner's cost model of a Stable Diffusion member (workload/cost_model.py says how the planner uses it).

A convolution-and-attention UNet trained data parallel: one "layer" holding every trained parameter
(no pipeline cut, no tensor-parallel split), images as the progress unit. FLOPs per image: the
UNet's forward and backward (3 x forward, counted by torch's FlopCounterMode on the meta device)
plus the frozen text encoder's forward; the VAE does not run in training (the shards hold its
moments). Activations: a rough 60 values per latent pixel per base channel, 16-bit (the UNet keeps
its ResNet and attention intermediates at every level). AdamW keeps two fp32 moments.

Convergence: sd-laion400m from MLPerf's reference convergence points (rcps_stable_diffusion.json,
steps to target by batch size, converted to images); the tiers from their recorded reference runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import ConvergencePoints, SampleFlops, WorkloadCost
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.stable_diffusion.spec import MEMBERS, MLPERF_ROUND, SDSpec, get_member

ADAM_BYTES = 8
BYTES_PER_VALUE = 2
ACTIVATION_VALUES_PER_PIXEL_CHANNEL = 60


@cache
def unet_forward_flops(spec: SDSpec) -> float:
    """FLOPs of one image's UNet forward, counted on the meta device."""
    from torch.utils.flop_counter import FlopCounterMode

    shape = spec.unet
    with torch.device("meta"):
        unet = shape.build()
        x = torch.zeros(1, shape.channels, shape.sample_size, shape.sample_size)
        context = torch.zeros(1, spec.text_length, shape.cross_attention_dim)
        with FlopCounterMode(display=False) as counter:
            unet(x, torch.zeros(1, dtype=torch.long), encoder_hidden_states=context)
    return float(counter.get_total_flops())


def run_progress(spec: SDSpec) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike."""
    # the v3.1 logs count progress in optimizer steps (step_num)
    return Progress(unit="images", units_per_sample=1, log_key="step_num", log_in="steps",
                    samples_per_step=spec.global_batch_size)


@dataclass(frozen=True)
class SDCost(SpecCost):
    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: SDSpec

    @property
    def parameter_count(self) -> int:
        return self.spec.parameter_count()

    layers = 1
    other_parameters = 0.0

    @property
    def layer_parameters(self) -> float:
        return float(self.parameter_count)

    tensor_parallel_units = 1
    tensor_parallel_unit = "networks (no tensor-parallel split)"

    @property
    def flops_per_sample(self) -> SampleFlops:
        return SampleFlops(weights=3 * unet_forward_flops(self.spec))

    @property
    def boundary_values_per_sample(self) -> float:
        u = self.spec.unet
        return float(u.channels * u.sample_size ** 2)

    optimizer_state_bytes_per_parameter = ADAM_BYTES

    spec_progress = staticmethod(run_progress)

    @property
    def sample_noun(self) -> str:
        return f"images ({self.spec.unet.sample_size}^2 latents)"

    @property
    def eval_samples(self) -> int:
        return self.spec.eval_captions

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        u = self.spec.unet
        pixels = u.sample_size ** 2
        if recompute == "full":
            return micro_batch * pixels * u.channels * BYTES_PER_VALUE
        return micro_batch * pixels * u.block_out_channels[0] * ACTIVATION_VALUES_PER_PIXEL_CHANNEL * BYTES_PER_VALUE

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)

    @property
    def tp_collectives_per_layer(self) -> int:
        return 0

    def rules_convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints:
        steps = super().rules_convergence(mlperf_dir)  # the rules count steps to target per batch size
        return ConvergencePoints(tuple((bs, s * bs) for bs, s in steps.points), steps.source + " (steps x batch)")

    def measured_efficiency(self) -> tuple[float, str] | None:
        return None


def cost_model(member: str) -> WorkloadCost:
    return SDCost(get_member(member))
