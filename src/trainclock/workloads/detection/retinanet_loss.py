"""RetinaNet's losses for the whole batch at once, without a host synchronisation.

torchvision's RetinaNetHead.compute_loss loops over the images in Python, builds a one-hot target
of every anchor x every class per image (120k x 264 at full size) and reads the foreground count
and boolean-mask shapes back from the device for each image. BatchedRetinaNetHead computes the
same two losses (focal classification over the anchors not between thresholds, box regression
over the foreground, each divided by max(1, foreground anchors) of its image, then averaged over
the images) with fixed shapes: the focal loss as if every target were 0, corrected at each
foreground anchor's own class, so no one-hot exists."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.models.detection._utils import Matcher
from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead
from torchvision.ops import box_iou

# torchvision.ops.sigmoid_focal_loss's defaults, as RetinaNet uses them; NegativeFocalSum's derivative assumes gamma 2
FOCAL_ALPHA, FOCAL_GAMMA = 0.25, 2.0


def focal_negative(x: Tensor) -> Tensor:
    """sigmoid_focal_loss(x, 0): (1 - alpha) * p^gamma * BCE(x, 0), with BCE(x, 0) = softplus(x)."""
    return (1 - FOCAL_ALPHA) * torch.sigmoid(x).pow(FOCAL_GAMMA) * F.softplus(x)


class NegativeFocalSum(torch.autograd.Function):
    """focal_negative(x).sum(-1) with its derivative written out, (1 - alpha) * p^2 * (p + 2 (1 - p)
    softplus(x)): it saves only x and recomputes the rest, where autograd would keep four tensors of
    x's size (10^8 elements at full size) and make twice the passes over them; 1.5x less CPU time."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return torch.sigmoid(x).square_().mul_(F.softplus(x)).sum(-1).mul_(1 - FOCAL_ALPHA)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        p = torch.sigmoid(x)
        # in place: each temporary is as large as x
        slope = torch.sub(1, p).mul_(F.softplus(x)).mul_(FOCAL_GAMMA).add_(p).mul_(p).mul_(p)
        return slope.mul_(grad.unsqueeze(-1) * (1 - FOCAL_ALPHA))


def focal_positive(x: Tensor) -> Tensor:
    """sigmoid_focal_loss(x, 1): alpha * (1 - p)^gamma * BCE(x, 1); 1 - sigmoid(x) = sigmoid(-x)."""
    return FOCAL_ALPHA * torch.sigmoid(-x).pow(FOCAL_GAMMA) * F.softplus(-x)


def padded_targets(targets: list[dict[str, Tensor]]) -> tuple[Tensor, Tensor, Tensor]:
    """(boxes (N, M + 1, 4), labels (N, M + 1), real (N, M + 1): which rows are boxes) with M the most
    boxes in an image: one padding row more so that an image with no boxes still has a row to gather
    (its anchors are never foreground, so the row's value never counts). Shapes come from the
    tensors' sizes, not their values."""
    pad = torch.nn.utils.rnn.pad_sequence
    boxes = pad([t["boxes"] for t in targets], batch_first=True)
    labels = pad([t["labels"] for t in targets], batch_first=True)
    real = pad([torch.ones_like(t["labels"], dtype=torch.bool) for t in targets], batch_first=True)
    return F.pad(boxes, (0, 0, 0, 1)), F.pad(labels, (0, 1)), F.pad(real, (0, 1))


def match_anchors(boxes: Tensor, real: Tensor, anchors: Tensor, matcher: Matcher) -> Tensor:
    """torchvision's Matcher on every image at once: boxes (N, M, 4) padded, real (N, M), anchors
    (N, A, 4) -> (N, A) matched box per anchor, BELOW_LOW_THRESHOLD or BETWEEN_THRESHOLDS. The
    Matcher's low-quality step finds its anchors with torch.where (a host read); here a mask."""
    # padding rows at -1 lose every max to a real box (IoU >= 0); an image of none is all background
    quality = torch.where(real.unsqueeze(-1), box_iou(boxes, anchors), -1.0)
    best, matches = quality.max(1)  # the first of equal maxima, as the Matcher's max
    below = best < matcher.low_threshold
    between = (best >= matcher.low_threshold) & (best < matcher.high_threshold)
    thresholded = torch.where(below, Matcher.BELOW_LOW_THRESHOLD,
                              torch.where(between, Matcher.BETWEEN_THRESHOLDS, matches))
    if not matcher.allow_low_quality_matches:
        return thresholded
    # an anchor that is some real box's best (ties included) keeps its own best box, as the Matcher does
    best_for_box = quality.max(2, keepdim=True).values
    rescued = ((quality == best_for_box) & real.unsqueeze(-1)).any(1)
    return torch.where(rescued, matches, thresholded)


def gather_rows(table: Tensor, index: Tensor) -> Tensor:
    """table (N, M, *rest) at index (N, A) -> (N, A, *rest): each anchor's matched row."""
    rest = table.shape[2:]
    expanded = index.reshape(*index.shape, *(1,) * len(rest)).expand(*index.shape, *rest)
    return table.gather(1, expanded)


class BatchedRetinaNetHead(RetinaNetHead):
    """torchvision's RetinaNetHead (same layers, same state dict) whose compute_loss runs on the
    stacked batch: no per-image loop, no one-hot, no read of the device's values."""

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor],
                     anchors: list[Tensor], matched_idxs: list[Tensor]) -> dict[str, Tensor]:
        matched = torch.stack(matched_idxs)  # (N, A): every image of a batch has the same anchors
        foreground = matched >= 0
        valid = matched != Matcher.BETWEEN_THRESHOLDS
        # max(1, count) per image, kept on the device
        normaliser = foreground.sum(1).clamp(min=1).to(torch.float32)
        # any in-range row for the anchors that are not foreground; their values are masked below
        index = matched.clamp(min=0)
        boxes, labels, _ = padded_targets(targets)
        return {
            "classification": self._classification(head_outputs["cls_logits"], gather_rows(labels, index),
                                                   foreground, valid, normaliser),
            "bbox_regression": self._regression(head_outputs["bbox_regression"], torch.stack(anchors),
                                                gather_rows(boxes, index), foreground, normaliser),
        }

    @staticmethod
    def _classification(logits: Tensor, label: Tensor, foreground: Tensor, valid: Tensor,
                        normaliser: Tensor) -> Tensor:
        x = logits.float()  # (N, A, K); fp32 under autocast too: the sum runs over 10^8 terms
        # every (anchor, class) as a negative, summed over the classes first so the mask is per anchor
        negative = NegativeFocalSum.apply(x)
        # the one class that is positive at a foreground anchor: swap its negative term for a positive one
        own = x.gather(2, label.long().unsqueeze(-1)).squeeze(-1)
        per_anchor = torch.where(valid, negative, 0.0) + torch.where(
            foreground, focal_positive(own) - focal_negative(own), 0.0)
        return (per_anchor.sum(1) / normaliser).mean()

    def _regression(self, regression: Tensor, anchors: Tensor, gt: Tensor, foreground: Tensor,
                    normaliser: Tensor) -> Tensor:
        loss_type = self.regression_head._loss_type
        if loss_type not in ("l1", "smooth_l1"):
            raise ValueError(f"BatchedRetinaNetHead supports the l1 and smooth_l1 box losses, not {loss_type}")
        n, a = foreground.shape
        # background anchors regress onto themselves: a finite target of zeros, masked out below anyway
        gt = torch.where(foreground.unsqueeze(-1), gt, anchors)
        target = self.regression_head.box_coder.encode_single(gt.reshape(-1, 4), anchors.reshape(-1, 4))
        pred = regression.float().reshape(-1, 4)
        if loss_type == "l1":
            elementwise = F.l1_loss(pred, target, reduction="none")
        else:  # torchvision's default beta when no cnf is given
            elementwise = F.smooth_l1_loss(pred, target, reduction="none", beta=1.0)
        per_anchor = torch.where(foreground, elementwise.sum(-1).view(n, a), 0.0)
        return (per_anchor.sum(1) / normaliser).mean()


class BatchedRetinaNet(RetinaNet):
    """torchvision's RetinaNet whose anchor matching runs on the stacked batch (match_anchors) and
    whose head is a BatchedRetinaNetHead: a training step with no host read."""

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None):
        if not self.training:
            return super().forward(images, targets)
        if targets is None:
            raise ValueError("RetinaNet trains on targets: pass them with the images")
        # torchvision's training forward less its check for degenerate boxes, a host read an image:
        # the data reader drops every box without width or height in float32 (data/layout.py), and
        # the resize scales widths by a positive factor
        images, targets = self.transform(images, targets)
        features = list(self.backbone(images.tensors).values())
        head_outputs = self.head(features)
        anchors = self.anchor_generator(images, features)
        return self.compute_loss(targets, head_outputs, anchors)

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor],
                     anchors: list[Tensor]) -> dict[str, Tensor]:
        if not isinstance(self.head, BatchedRetinaNetHead):
            raise TypeError(f"BatchedRetinaNet needs a BatchedRetinaNetHead, not {type(self.head).__name__}")
        boxes, _, real = padded_targets(targets)
        matched = match_anchors(boxes, real, torch.stack(anchors), self.proposal_matcher)
        return self.head.compute_loss(targets, head_outputs, anchors, list(matched.unbind(0)))
