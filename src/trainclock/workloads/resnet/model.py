"""The models: torchvision's ResNet class for every member. resnet-50 is torchvision's resnet50
(v1.5: the stride on the 3x3 convolution of each bottleneck; 25,557,032 parameters); the CPU tiers
are the same class with the same blocks at a smaller width and depth and a CIFAR-style stem (one
3x3 convolution, no max-pool: a 28-pixel image cannot afford the 4x down-sampling of the ImageNet
stem), so they run torchvision's own forward (ResNet._forward_impl) and blocks."""

from __future__ import annotations

from functools import cache

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet, conv3x3, resnet50

from trainclock.workloads.resnet.shape import RESNET50, ResNetShape


class TierResNet(ResNet):
    """torchvision's ResNet at a chosen width per stage, with fewer stages allowed (the missing
    ones are identities, so ResNet._forward_impl runs unchanged)."""

    def __init__(self, shape: ResNetShape) -> None:
        nn.Module.__init__(self)
        block = BasicBlock if shape.block == "basic" else Bottleneck
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = shape.widths[0], 1, 1, 64
        self.conv1 = conv3x3(3, self.inplanes)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity()
        for i in range(4):
            if i < len(shape.layers):
                stage = self._make_layer(block, shape.widths[i], shape.layers[i], stride=1 if i == 0 else 2)
            else:
                stage = nn.Identity()
            setattr(self, f"layer{i + 1}", stage)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(shape.widths[len(shape.layers) - 1] * block.expansion, shape.num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)


def build_model(shape: ResNetShape) -> nn.Module:
    if shape == RESNET50:
        return resnet50(weights=None)
    if shape.stem != "cifar":
        raise ValueError(f"no model for {shape}")
    return TierResNet(shape)


@cache  # the planner asks once per candidate layout: building even a meta network costs milliseconds
def parameter_count(shape: ResNetShape) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in build_model(shape).parameters())


def forward_flops(model: nn.Module, image_size: int) -> float:
    """FLOPs of one image's forward pass: 2 x the multiply-adds of every convolution and linear
    layer (the weights' matmuls; BN, ReLU and pooling are not counted, as MLPerf's MFU does not)."""
    total = 0.0

    def count(module: nn.Module, inputs, output) -> None:
        nonlocal total
        if isinstance(module, nn.Conv2d):
            per_output = module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1]
            total += 2.0 * output[0].numel() * per_output
        elif isinstance(module, nn.Linear):
            total += 2.0 * module.in_features * module.out_features

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, image_size, image_size, device="meta"))
    finally:
        for h in hooks:
            h.remove()
    return total


def train_flops_per_image(shape: ResNetShape) -> float:
    """Forward + backward (2x the forward) of one training image."""
    with torch.device("meta"):
        model = build_model(shape)
    return 3.0 * forward_flops(model, shape.image_size)
