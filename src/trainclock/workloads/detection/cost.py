"""The planner's cost model of a detection member (workload/cost_model.py says how the planner uses it).

Both models train data parallel only: one unit the planner cannot split and one "layer" holding
every parameter. FLOPs per image are those of the convolutions and linear layers the image runs
through in a training step, counted by torch's FlopCounterMode on the meta device at the member's
image size (Mask R-CNN: the short side, the long one at the data's usual aspect): the backbone,
FPN and RetinaNet heads; for Mask R-CNN also the RPN head, the box head and predictor on the RoIs
torchvision samples (box_batch_size_per_image, but at most the proposals and ground-truth boxes
there are) and the mask head on the positive RoIs only, whose number depends on the data and the
training state: the shape's `mask_rois` says how many are expected (model.py). NMS, anchor
matching, RoIAlign and losses are not matmuls and are left out. Counting the mask head on a full
positive quarter of the sampled RoIs overcounted maskrcnn-tiny 1.7-2.4x. Activations: about 3
stored maps per convolution output, 16-bit. Progress is in epochs. Convergence: MLPerf's
reference points for the full sizes, the tiers' recorded reference runs (targets/<member>.json)
for them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from trainclock.workload.base import Progress
from trainclock.workload.cost_model import SampleFlops, WorkloadCost
from trainclock.workload.spec_base import MemberSet
from trainclock.workload.spec_cost import SpecCost
from trainclock.workloads.detection.shape import POSITIVE_FRACTION, DetectorShape
from trainclock.workloads.detection.spec import MEMBERS, MLPERF_ROUND, DetectionSpec, get_member

ADAM_STATE_BYTES, SGD_STATE_BYTES = 8, 4
MAPS_PER_CONV = 3
# The coefficient of variation of one training image's step work (the planner charges each step
# the wait for the slowest data-parallel replica, step_time.straggler_seconds), by member. Mask
# R-CNN's images differ in size and object count (the RPN's proposals, the mask head's positives,
# padding to the batch's largest image): measured on the one log of the training scale in shared/
# (Dell XE9680, 8 x H100, 12 images per GPU, v3.1/.../maskrcnn/result_*.txt): the 50-step means of
# tracked_stats' step time vary by 0.27 ms step to step (successive differences, all five runs
# alike) around 68.3 ms, i.e. 1.9 ms (2.8%) per step; a step being the largest of 8 replicas, whose
# spread is 0.61 of one replica's, one replica's step varies by 4.6% and one image's by
# 4.6% x sqrt(12) = 0.16. RetinaNet trains fixed 800 x 800 images: none declared.
SAMPLE_WORK_CV = {"maskrcnn-r50": 0.16}


@dataclass(frozen=True)
class ForwardCosts:
    """One image's forward FLOPs: `image` for everything run once per image (backbone, FPN, the
    RetinaNet or RPN head), per RoI for the box and mask heads; `outputs`: convolution output values."""

    image: float
    box_roi: float = 0.0
    mask_roi: float = 0.0
    outputs: float = 0.0

    def total(self, box_rois: float, mask_rois: float) -> float:
        return self.image + box_rois * self.box_roi + mask_rois * self.mask_roi


def expected_rois(shape: DetectorShape) -> tuple[float, float]:
    """(box head, mask head) RoIs per training image: torchvision samples box_batch_size_per_image
    among the proposals and the ground-truth boxes, and trains the mask head on the positives."""
    if shape.arch != "maskrcnn":
        return 0.0, 0.0
    box = float(min(shape.roi_batch, shape.candidates + shape.objects_per_image))
    return box, min(shape.mask_rois, box * POSITIVE_FRACTION)


def _counted(run: Callable[[], object]) -> float:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        run()
    return float(counter.get_total_flops())


@cache
def forward_costs(shape: DetectorShape) -> ForwardCosts:
    """The parts of one image's forward FLOPs, measured on the meta device."""
    outputs = 0

    def count(module: nn.Module, inputs, output) -> None:
        nonlocal outputs
        outputs += output.numel()

    from trainclock.workloads.detection.model import build_model  # torchvision: only where a network is built

    with torch.device("meta"):
        model = build_model(shape).eval()  # batch norm over one image's 1x1 maps refuses to train
    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, nn.Conv2d)]
    side, c = shape.min_size, shape.fpn_channels
    long = side if shape.fixed_size else min(shape.max_size, round(side * shape.aspect))

    def per_image() -> None:
        levels = list(model.backbone(torch.zeros(1, 3, side, long, device="meta")).values())
        heads = (model.head.classification_head, model.head.regression_head) if shape.arch == "retinanet" \
            else (model.rpn.head,)
        for head in heads:
            head(levels)

    image = _counted(per_image)
    for h in hooks:
        h.remove()
    if shape.arch == "retinanet":
        return ForwardCosts(image, outputs=float(outputs))
    roi = model.roi_heads
    box = _counted(lambda: roi.box_predictor(roi.box_head(torch.zeros(1, c, 7, 7, device="meta"))))
    mask = _counted(lambda: roi.mask_predictor(roi.mask_head(torch.zeros(1, c, 14, 14, device="meta"))))
    return ForwardCosts(image, box, mask, float(outputs))


def train_flops_per_image(spec: DetectionSpec) -> float:
    return 3.0 * forward_costs(spec.shape).total(*expected_rois(spec.shape))  # forward + backward, 1:2


def run_progress(spec: DetectionSpec, samples_per_epoch: int | None = None) -> Progress:
    """How a run of `spec` counts its progress: the job's (workload.py) and, as its codec, the cost
    model's, so that the plan and the log count alike. `samples_per_epoch`: the training set's own
    size, where the job counts it from its data (default: the spec's)."""
    # both benchmarks' logs count eval_accuracy's epoch_num in epochs
    return Progress(unit="images", units_per_sample=1, log_key="epoch_num", log_in="epochs",
                    samples_per_epoch=samples_per_epoch or spec.train_images)


@dataclass(frozen=True)
class DetectionCost(SpecCost):
    mlperf_round = MLPERF_ROUND

    spec: DetectionSpec

    @property
    def members(self) -> MemberSet[DetectionSpec]:
        return MEMBERS[self.spec.benchmark]  # its own benchmark's, of the package's two

    layers = 1
    tensor_parallel_units = 1
    tensor_parallel_unit = "whole networks (data parallel only)"
    other_parameters = 0.0
    boundary_values_per_sample = 0.0
    tp_collectives_per_layer = 0

    spec_progress = staticmethod(run_progress)

    sample_noun = "images"

    @property
    def benchmark(self) -> str:
        return self.spec.benchmark

    @cached_property
    def parameter_count(self) -> int:
        return self.spec.parameter_count()

    @property
    def layer_parameters(self) -> float:
        return float(self.parameter_count)

    @property
    def optimizer_state_bytes_per_parameter(self) -> float:
        return ADAM_STATE_BYTES if self.spec.benchmark == "ssd" else SGD_STATE_BYTES

    @property
    def flops_per_sample(self) -> SampleFlops:
        return SampleFlops(weights=train_flops_per_image(self.spec))

    @property
    def eval_samples(self) -> int:
        return self.spec.val_images

    @property
    def sample_work_cv(self) -> float:
        """How much one image's training work varies (coefficient of variation; SAMPLE_WORK_CV)."""
        return SAMPLE_WORK_CV.get(self.spec.name, 0.0)

    def layer_activation_bytes(self, micro_batch: int, tp: int, sequence_parallel: bool, recompute: str) -> float:
        if recompute == "full":
            return 2.0 * micro_batch * 3 * self.spec.shape.min_size ** 2
        return 2.0 * micro_batch * MAPS_PER_CONV * forward_costs(self.spec.shape).outputs

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        return ("none",)

    @property
    def units_per_progress(self) -> float:
        return self.spec.train_images  # the runs record images, the rules count epochs

    def measured_efficiency(self) -> tuple[float, str] | None:
        return None  # no FLOPs per sample in the runs' logs (data-dependent), hence no recorded MFU


def cost_model(member: str, benchmark: str) -> WorkloadCost:
    """The cost model of a member of `benchmark` (ssd or maskrcnn); UsageError if unknown."""
    return DetectionCost(get_member(member, benchmark))
