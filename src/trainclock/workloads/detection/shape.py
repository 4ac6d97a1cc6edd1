"""A detector's shape: which network, how wide, at what image size, and what the cost model
expects of its data. Apart from model.py so that a member's spec (read by every trainclock command
through the registry) does not import torchvision, which model.py builds the networks from."""

from __future__ import annotations

from dataclasses import dataclass

POSITIVE_FRACTION = 0.25  # Mask R-CNN's box_positive_fraction: at most this share of the sampled RoIs are positive


@dataclass(frozen=True)
class DetectorShape:
    arch: str  # "retinanet" or "maskrcnn"
    backbone: str  # "resnext50_32x4d", "resnet50", or "small" (a tier's narrow ResNet)
    num_classes: int  # RetinaNet: object classes; Mask R-CNN: with the background
    min_size: int
    max_size: int
    fixed_size: bool  # the ssd reference resizes to a square (800x800), Mask R-CNN keeps the aspect
    # batches padded to a few bucketed sizes (transform.py): the full Mask R-CNN's ~250 batch shapes become
    # at most 36 for cuDNN's search and compile; not the tiers, whose padding would only cost CPU time
    bucketed: bool = False
    widths: tuple[int, ...] = ()  # small backbone: channels of its 4 stages
    fpn_channels: int = 256
    head_hidden: int = 1024  # Mask R-CNN's box head (TwoMLPHead) width
    anchor_base: int = 32  # the smallest anchor (P3 for RetinaNet, P2 for Mask R-CNN), doubling per level
    detections_per_image: int = 300
    candidates: int = 1000  # RetinaNet topk_candidates per level; Mask R-CNN RPN proposals per image (train)
    test_candidates: int = 1000  # Mask R-CNN RPN proposals per image at evaluation
    roi_batch: int = 512  # Mask R-CNN box sampling per image
    # the cost model's (cost.py) expectations of the data and of training, not the model's settings:
    objects_per_image: float = 7.3  # ground-truth boxes per training image (COCO 2017 train: 860,001 / 117,266)
    aspect: float = 1.0  # an image's long side over its short one: COCO's are mostly 640x480 (Mask R-CNN: 800x1067)
    # positive RoIs per training image, the mask head's batch: the ground-truth boxes (torchvision adds them to the
    # proposals) and the proposals overlapping them by IoU >= 0.5, at most POSITIVE_FRACTION x roi_batch. Full
    # size: an estimate (no COCO run here), about 5 per object against the 128 allowed, as Detectron2's R50-FPN
    # logs' roi_head/num_fg_samples are in the tens; the tiers' value is measured (spec.py).
    mask_rois: float = 40.0

    def describe(self) -> str:
        body = self.backbone if self.backbone != "small" else f"ResNet {'-'.join(map(str, self.widths))}"
        return f"{self.arch} {body}-FPN{self.fpn_channels}, {self.min_size}px"
