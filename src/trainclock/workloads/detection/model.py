"""The detection models, from torchvision: RetinaNet (MLPerf ssd: ResNeXt50_32x4d-FPN, P3-P7, the
classification and box heads of 4 convolutions, focal loss) and Mask R-CNN (R-50-FPN). The full
sizes freeze batch norm and train the reference's top 3 backbone stages from ImageNet weights
read from a local file. The CPU tiers put the same FPN, heads and losses on a narrow ResNet of
BasicBlocks trained from scratch with ordinary batch norm (no ImageNet weights exist for it)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch
from torch import nn
from torchvision.models import resnet50, resnext50_32x4d
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import BackboneWithFPN, _resnet_fpn_extractor
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.models.resnet import BasicBlock
from torchvision.ops import FrozenBatchNorm2d
from torchvision.ops.feature_pyramid_network import LastLevelMaxPool, LastLevelP6P7

from trainclock.errors import UsageError
from trainclock.workloads.detection.shape import POSITIVE_FRACTION, DetectorShape
from trainclock.workloads.detection.maskrcnn_heads import BatchedMaskRCNN
from trainclock.workloads.detection.retinanet_loss import BatchedRetinaNet, BatchedRetinaNetHead
from trainclock.workloads.detection.transform import DetectionTransform

TRAINABLE_BACKBONE_LAYERS = 3  # both references
IMAGE_MEAN, IMAGE_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
class SmallResNet(nn.Module):
    """A ResNet of one BasicBlock per stage, named as torchvision's (layer1..layer4) so the same
    FPN extractor reads it; stride 4 after the stem, as ResNet's."""

    def __init__(self, widths: tuple[int, ...]) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        inplanes = widths[0]
        for i, width in enumerate(widths):
            stride = 1 if i == 0 else 2
            down = None if stride == 1 and inplanes == width else nn.Sequential(
                nn.Conv2d(inplanes, width, 1, stride, bias=False), nn.BatchNorm2d(width))
            setattr(self, f"layer{i + 1}", BasicBlock(inplanes, width, stride, down))
            inplanes = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for i in range(1, 5):
            x = getattr(self, f"layer{i}")(x)
        return x


class CpuSafeP6P7(LastLevelP6P7):
    """RetinaNet's P6 and P7, in fp32 under a CPU's bf16 autocast: there oneDNN's bf16 weight
    gradient of a stride-2 3x3 convolution over a 1x1 map is garbage (up to 1e17, in 95% of
    trials with torch 2.14 on an AMX Xeon; 2x2 and larger maps are right), and a tier's 64px
    image makes P6 1x1, so retinanet-tiny diverged at its first steps in bf16. P6 and P7 are
    under 1% of the FLOPs."""

    def forward(self, p: list[torch.Tensor], c: list[torch.Tensor], names: list[str]):
        if not (p[-1].device.type == "cpu" and torch.is_autocast_enabled("cpu")):
            return super().forward(p, c, names)
        with torch.autocast("cpu", enabled=False):
            extra, extra_names = super().forward([p[-1].float()], [c[-1].float()], [])
        return [*p, *extra[1:]], [*names, *extra_names]


def _backbone(shape: DetectorShape, weights: str | None) -> BackboneWithFPN:
    returned = [2, 3, 4] if shape.arch == "retinanet" else [1, 2, 3, 4]
    extra = (CpuSafeP6P7(shape.fpn_channels, shape.fpn_channels) if shape.arch == "retinanet"
             else LastLevelMaxPool())
    if shape.backbone == "small":
        body = SmallResNet(shape.widths)
        in_channels = [shape.widths[i - 1] for i in returned]
        return BackboneWithFPN(body, {f"layer{i}": str(k) for k, i in enumerate(returned)}, in_channels,
                               shape.fpn_channels, extra_blocks=extra)
    build = {"resnext50_32x4d": resnext50_32x4d, "resnet50": resnet50}[shape.backbone]
    body = build(weights=None, norm_layer=FrozenBatchNorm2d)
    if weights is not None:
        try:
            missing = body.load_state_dict(load_backbone_weights(weights), strict=False).missing_keys
        except RuntimeError:  # a tensor of another shape: another network's weights
            missing = ["a tensor of the right shape"]
        if missing:  # the classifier (fc) may be absent or extra; any convolution or norm may not
            raise UsageError(f"{weights} is not a torchvision {shape.backbone} state dict (it lacks {missing[0]})")
    return _resnet_fpn_extractor(body, TRAINABLE_BACKBONE_LAYERS, returned_layers=returned, extra_blocks=extra)


def load_backbone_weights(path: str) -> dict:
    file = Path(path).expanduser()
    if not file.is_file():
        raise UsageError(f"backbone weights {file} not found: pass --backbone-weights PATH to a local ImageNet "
                         "checkpoint of the backbone (torchvision's state dict); nothing is downloaded")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise UsageError(f"cannot read backbone weights {file} ({type(e).__name__})") from None
    return state.get("state_dict", state) if isinstance(state, dict) else state


def _anchors(shape: DetectorShape, levels: int, per_octave: int) -> AnchorGenerator:
    scales = [2 ** (i / per_octave) for i in range(per_octave)]
    sizes = tuple(tuple(int(shape.anchor_base * 2 ** k * s) for s in scales) for k in range(levels))
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * levels)


def build_model(shape: DetectorShape, weights: str | None = None) -> nn.Module:
    backbone = _backbone(shape, weights)
    c = shape.fpn_channels
    if shape.arch == "retinanet":
        anchors = _anchors(shape, 5, 3)
        model = BatchedRetinaNet(backbone, shape.num_classes, anchor_generator=anchors,
                                 head=BatchedRetinaNetHead(c, anchors.num_anchors_per_location()[0], shape.num_classes),
                                 detections_per_img=shape.detections_per_image, topk_candidates=shape.candidates)
    else:
        anchors = AnchorGenerator(tuple((shape.anchor_base * 2 ** k,) for k in range(5)), ((0.5, 1.0, 2.0),) * 5)
        # torchvision's MaskRCNN whose RPN and RoI heads train at fixed shapes (maskrcnn_heads.py)
        model = BatchedMaskRCNN(backbone, None, rpn_anchor_generator=anchors,  # the predictors below fix the classes
                                rpn_pre_nms_top_n_train=shape.candidates, rpn_post_nms_top_n_train=shape.candidates,
                                rpn_pre_nms_top_n_test=shape.test_candidates,
                                rpn_post_nms_top_n_test=shape.test_candidates,
                                box_head=TwoMLPHead(c * 7 * 7, shape.head_hidden),
                                box_predictor=FastRCNNPredictor(shape.head_hidden, shape.num_classes),
                                mask_head=MaskRCNNHeads(c, (c,) * 4, 1),
                                mask_predictor=MaskRCNNPredictor(c, c, shape.num_classes),
                                box_detections_per_img=shape.detections_per_image,
                                box_batch_size_per_image=shape.roi_batch,
                                box_positive_fraction=POSITIVE_FRACTION)
    fixed = (shape.min_size, shape.min_size) if shape.fixed_size else None
    model.transform = DetectionTransform(shape.min_size, shape.max_size, IMAGE_MEAN, IMAGE_STD, fixed_size=fixed,
                                         bucketed=shape.bucketed)
    return model


@cache
def parameter_count(shape: DetectorShape) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in build_model(shape).parameters())
