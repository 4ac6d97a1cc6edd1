"""The planner's cost model of a ResNet member (workload/cost_model.py says how the planner uses it).

ResNet trains data parallel only: one unit the planner cannot split (tensor_parallel_units 1) and
one "layer" holding every parameter (no pipeline). Its FLOPs are all convolutions and the
classifier (weights; no attention), counted from the model itself (model.py). Progress is in
epochs, so one image is 1/train_images of the unit. Activations: what a ResNet keeps for its
backward pass is dominated by each convolution's, batch norm's and ReLU's output; counted from the
model's feature-map sizes (about 3 maps per convolution), 16-bit.

Convergence: resnet-50 from MLPerf's reference convergence points (rcps_resnet.json, in epochs);
the tiers from the epochs at which each recorded reference run (targets/<member>.json) first
reached the target, at the spec's batch size."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import nn

from trainclock.workload import evidence
from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops, WorkloadCost
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.resnet.spec import MEMBERS, MLPERF_ROUND, ResNetSpec, get_member

SGD_STATE_BYTES = 4  # one fp32 momentum buffer per parameter (LARS and SGD alike)
MAPS_PER_CONV = 3  # a convolution's output, its batch norm's and its ReLU's are kept for the backward


def activation_values_per_image(spec: ResNetSpec) -> float:
    """Values of every convolution's output for one image (shapes from a meta-device forward)."""
    total = 0

    def count(module: nn.Module, inputs, output) -> None:
        nonlocal total
        total += output[0].numel()

    from trainclock.workloads.resnet.model import build_model  # torchvision: only where a network is built

    with torch.device("meta"):
        model = build_model(spec.shape)
    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model(torch.zeros(1, 3, spec.shape.image_size, spec.shape.image_size, device="meta"))
    for h in hooks:
        h.remove()
    return float(total)


def run_progress(spec: ResNetSpec, samples_per_epoch: int | None = None) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike. `samples_per_epoch`: the training set's own
    size, where the job counts it from its data (default: the spec's)."""
    # MLPerf resnet counts progress in epochs (eval_accuracy's epoch_num)
    return Progress(unit="images", units_per_sample=1, log_key="epoch_num", log_in="epochs",
                    samples_per_epoch=samples_per_epoch or spec.train_images)


@dataclass(frozen=True)
class ResNetCost(SpecCost):
    mlperf_round = MLPERF_ROUND
    members = MEMBERS

    spec: ResNetSpec

    @cached_property
    def parameter_count(self) -> int:
        return self.spec.parameter_count()

    layers = 1  # no pipeline cut: the whole network is one unit
    tensor_parallel_units = 1
    tensor_parallel_unit = "whole networks (data parallel only)"
    other_parameters = 0.0
    boundary_values_per_sample = 0.0  # no tensor or pipeline parallel traffic
    tp_collectives_per_layer = 0
    optimizer_state_bytes_per_parameter = SGD_STATE_BYTES

    spec_progress = staticmethod(run_progress)

    sample_noun = "images"

    @property
    def layer_parameters(self) -> float:
        return float(self.parameter_count)

    @cached_property
    def flops_per_sample(self) -> SampleFlops:
        from trainclock.workloads.resnet.model import train_flops_per_image  # torchvision: only where a network is built

        return SampleFlops(weights=train_flops_per_image(self.spec.shape))

    @property
    def eval_samples(self) -> int:
        return self.spec.val_images

    @cached_property
    def _activations(self) -> float:
        return activation_values_per_image(self.spec)

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        if recompute == "full":  # only the input image is kept
            return 2.0 * micro_batch * 3 * self.spec.shape.image_size ** 2
        return 2.0 * micro_batch * MAPS_PER_CONV * self._activations

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)  # nobody recomputes a ResNet: it fits

    @property
    def units_per_progress(self) -> float:
        return self.spec.train_images  # the runs record images, the rules count epochs

    def measured_efficiency(self) -> tuple[float, str] | None:
        """The median MFU of one measured member's reference runs, this member's first (not the
        pooled runs of all members, as the base does)."""
        names = [s.name for s in MEMBERS.measured()]
        for name in ([self.name] if self.name in names else []) + [n for n in names if n != self.name]:
            if mfus := evidence.mfus(self.target_evidence(name).get("runs")):
                return statistics.median(mfus), f"median MFU of {len(mfus)} {name} reference runs"
        return None


def cost_model(member: str) -> WorkloadCost:
    """The cost model of a ResNet member (names as get_member takes them); UsageError if unknown."""
    return ResNetCost(get_member(member))
