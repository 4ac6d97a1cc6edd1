"""A ResNet member's shape: blocks, widths, stem, classes and crop. Apart from model.py so that a
member's spec (read by every trainclock command through the registry) does not import torchvision,
whose ResNet class model.py builds every member from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResNetShape:
    block: str  # "basic" or "bottleneck"
    layers: tuple[int, ...]  # blocks per stage (1 to 4 stages)
    widths: tuple[int, ...]  # planes per stage
    stem: str  # "imagenet" (7x7/2 + max-pool) or "cifar" (3x3/1)
    num_classes: int
    image_size: int  # the training crop

    def describe(self) -> str:
        depth = sum(self.layers) * (3 if self.block == "bottleneck" else 2) + 2
        return (f"ResNet-{depth} ({self.block} blocks {'-'.join(map(str, self.layers))}, widths "
                f"{'-'.join(map(str, self.widths))}), {self.image_size}px, {self.num_classes} classes")


RESNET50 = ResNetShape("bottleneck", (3, 4, 6, 3), (64, 128, 256, 512), "imagenet", 1000, 224)
