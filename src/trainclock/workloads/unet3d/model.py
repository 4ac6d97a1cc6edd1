"""The reference 3D U-Net of MLPerf unet3d (mlcommons/training image_segmentation/pytorch,
model/unet3d.py and model/layers.py), with the filter list as a parameter so the CPU tiers run
the same network narrower and shallower. Every block is conv(3x3x3, no bias) -> InstanceNorm3d
(affine) -> ReLU; each level down is a strided conv, each level up a 2x2x2 transposed conv
concatenated with the skip. filters (32, 64, 128, 256, 320) gives the reference's 31.2M parameters."""

from __future__ import annotations

import torch
from torch import nn

N_CLASSES = 3  # background, kidney, tumour


def conv_block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         nn.InstanceNorm3d(cout, affine=True), nn.ReLU(inplace=True))


class Down(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv1 = conv_block(cin, cout, stride=2)
        self.conv2 = conv_block(cout, cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.conv1(x))


class Up(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.upsample_conv = nn.ConvTranspose3d(cin, cout, 2, stride=2, bias=True)  # norm "none": biased, as the reference
        self.conv1 = conv_block(2 * cout, cout)
        self.conv2 = conv_block(cout, cout)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.conv1(torch.cat((self.upsample_conv(x), skip), dim=1)))


class Unet3D(nn.Module):
    def __init__(self, filters: tuple[int, ...], in_channels: int = 1, n_class: int = N_CLASSES) -> None:
        super().__init__()
        self.filters = filters
        self.input_block = nn.Sequential(conv_block(in_channels, filters[0]), conv_block(filters[0], filters[0]))
        self.downsample = nn.ModuleList(Down(i, o) for i, o in zip(filters[:-1], filters[1:]))
        self.bottleneck = Down(filters[-1], filters[-1])
        ups = [Up(filters[-1], filters[-1])] + [Up(i, o) for i, o in zip(reversed(filters[1:]), reversed(filters[:-1]))]
        self.upsample = nn.ModuleList(ups)
        self.output = nn.Conv3d(filters[0], n_class, 1)

    @property
    def downsampling(self) -> int:
        """A patch side must be a multiple of this (one halving per level and the bottleneck)."""
        return 2 ** len(self.filters)

    def forward(self, x_NCDHW: torch.Tensor) -> torch.Tensor:
        x = self.input_block(x_NCDHW)
        skips = [x]
        for down in self.downsample:
            x = down(x)
            skips.append(x)
        x = self.bottleneck(x)
        for up, skip in zip(self.upsample, reversed(skips)):
            x = up(x, skip)
        return self.output(x)


def parameter_count(filters: tuple[int, ...], in_channels: int = 1, n_class: int = N_CLASSES) -> int:
    """The model's parameters by formula (the planner and `trainclock list` never build it)."""
    conv = lambda cin, cout: 27 * cin * cout + 2 * cout  # noqa: E731  (kernel + InstanceNorm affine)
    total = conv(in_channels, filters[0]) + conv(filters[0], filters[0])
    for i, o in zip(filters[:-1], filters[1:]):
        total += conv(i, o) + conv(o, o)
    total += 2 * conv(filters[-1], filters[-1])
    pairs = [(filters[-1], filters[-1])] + list(zip(reversed(filters[1:]), reversed(filters[:-1])))
    for i, o in pairs:
        total += 8 * i * o + o + conv(2 * o, o) + conv(o, o)
    return total + filters[0] * n_class + n_class


def flops_per_voxel(filters: tuple[int, ...], in_channels: int = 1, n_class: int = N_CLASSES) -> float:
    """Forward multiply-add FLOPs (2 per MAC) of the convolutions per input voxel: a level's
    voxels are 1/8 of the one above; a strided conv produces the lower level's voxels."""
    flops = 2 * 27 * (in_channels * filters[0] + filters[0] ** 2)
    levels = list(filters) + [filters[-1]]
    for depth, (i, o) in enumerate(zip(levels[:-1], levels[1:]), start=1):
        down = 2 * 27 * (i * o + o * o) * 8.0 ** -depth
        # transposed conv back to the level above (o*i MACs per output voxel), then its two convs there
        up = (2 * o * i + 2 * 27 * (2 * i * i + i * i)) * 8.0 ** -(depth - 1)
        flops += down + up
    return flops + 2 * filters[0] * n_class
