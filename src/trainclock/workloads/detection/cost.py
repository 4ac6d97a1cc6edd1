"""The planner's cost model of a detection member (workloads/cost.py says how the planner uses it).

Both models train data parallel only: one unit the planner cannot split and one "layer" holding
every parameter. FLOPs per image are those of the convolutions and linear layers the image runs
through, counted by torch's FlopCounterMode on the meta device at the member's image size: the
backbone, FPN and RetinaNet heads; for Mask R-CNN also the RPN head, the box head on the sampled
RoIs and the mask head on the positive quarter of them (NMS, anchor matching and losses are not
matmuls and are left out). Activations: about 3 stored maps per convolution output, 16-bit.
Progress is in epochs. Convergence: MLPerf's reference points for the full sizes, the tiers'
recorded reference runs (targets/<member>.json) for them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from trainclock.workloads import evidence
from trainclock.workloads.cost import ConvergencePoints, SampleFlops, SpecCost, WorkloadCost
from trainclock.workloads.detection.model import build_model, parameter_count
from trainclock.workloads.detection.spec import PACKAGE, DetectionSpec, get_member, quality

ADAM_STATE_BYTES, SGD_STATE_BYTES = 8, 4
MAPS_PER_CONV = 3
MASK_POSITIVE_FRACTION = 0.25  # Mask R-CNN's box_positive_fraction: the RoIs the mask head sees


def forward_costs(spec: DetectionSpec) -> tuple[float, float]:
    """(forward FLOPs, convolution output values) of one image, measured on the meta device."""
    shape = spec.shape
    outputs = 0

    def count(module: nn.Module, inputs, output) -> None:
        nonlocal outputs
        outputs += output.numel()

    with torch.device("meta"):
        model = build_model(shape).eval()  # batch norm over one image's 1x1 maps refuses to train
    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, nn.Conv2d)]
    side = shape.min_size
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        features = model.backbone(torch.zeros(1, 3, side, side, device="meta"))
        levels = list(features.values())
        if shape.arch == "retinanet":
            model.head.classification_head(levels)
            model.head.regression_head(levels)
        else:
            model.rpn.head(levels)
            c = shape.fpn_channels
            model.roi_heads.box_head(torch.zeros(shape.roi_batch, c, 7, 7, device="meta"))
            masks = max(1, int(shape.roi_batch * MASK_POSITIVE_FRACTION))
            model.roi_heads.mask_predictor(model.roi_heads.mask_head(torch.zeros(masks, c, 14, 14, device="meta")))
    for h in hooks:
        h.remove()
    return float(counter.get_total_flops()), float(outputs)


def train_flops_per_image(spec: DetectionSpec) -> float:
    return 3.0 * forward_costs(spec)[0]  # forward + backward, 1:2


@dataclass(frozen=True)
class DetectionCost(SpecCost):
    spec: DetectionSpec

    layers = 1
    tensor_parallel_units = 1
    tensor_parallel_unit = "whole networks (data parallel only)"
    other_parameters = 0.0
    boundary_values_per_sample = 0.0
    tp_collectives_per_layer = 0
    progress_unit = "epochs"
    sample_noun = "images"

    @property
    def benchmark(self) -> str:
        return self.spec.benchmark

    @cached_property
    def parameter_count(self) -> int:
        return parameter_count(self.spec.shape)

    @property
    def layer_parameters(self) -> float:
        return float(self.parameter_count)

    @property
    def optimizer_state_bytes_per_parameter(self) -> float:
        return ADAM_STATE_BYTES if self.spec.benchmark == "ssd" else SGD_STATE_BYTES

    @cached_property
    def _forward(self) -> tuple[float, float]:
        return forward_costs(self.spec)

    @property
    def flops_per_sample(self) -> SampleFlops:
        return SampleFlops(weights=3.0 * self._forward[0])

    @property
    def units_per_sample(self) -> float:
        return 1.0 / self.spec.train_images

    @property
    def eval_samples(self) -> int:
        return self.spec.val_images

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        if recompute == "full":
            return 2.0 * micro_batch * 3 * self.spec.shape.min_size ** 2
        return 2.0 * micro_batch * MAPS_PER_CONV * self._forward[1]

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)

    def convergence(self, mlperf_dir: Callable[[], Path]) -> ConvergencePoints | None:
        if self.spec.full:
            return super().convergence(mlperf_dir)
        recorded = evidence.load(PACKAGE, self.spec.name)
        if not evidence.is_measured(recorded):
            return None
        return evidence.convergence(self.spec.name, recorded["runs"], quality(self.spec), self.spec.global_batch_size,
                                    units_per_progress=self.spec.train_images)

    def measured_efficiency(self) -> tuple[float, str] | None:
        return None  # no FLOPs per sample in the runs' logs (data-dependent), hence no recorded MFU


def cost_model(member: str, benchmark: str) -> WorkloadCost:
    """The cost model of a member of `benchmark` (ssd or maskrcnn); UsageError if unknown."""
    return DetectionCost(get_member(member, benchmark))
