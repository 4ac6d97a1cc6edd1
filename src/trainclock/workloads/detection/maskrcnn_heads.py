"""Mask R-CNN's training step at fixed shapes: the RPN's proposals and losses and the RoI heads'
sampling and losses over the stacked batch, with no read of the device's values but NMS's.

torchvision's training step reads the device at every turn: its BalancedPositiveNegativeSampler runs
torch.where and randperm per image, select_training_samples, fastrcnn_loss and maskrcnn_loss index by
boolean masks or by variable-length positive sets, the Matcher's low-quality step and the RPN's box
filters use torch.where, and MultiScaleRoIAlign finds each level's RoIs with torch.where: each is a
nonzero whose size the host must wait for. Here:

- BatchedRPN: one top-k over every (image, level) at once; clipping, the small-box and score filters
  as masks (a box they drop becomes an empty one, which suppresses nothing and is dropped after
  NMS); NMS, one call per image, torchvision's own (batched_nms over the image's levels) on the
  same boxes; each image's best post_nms_top_n survivors into fixed (post_nms_top_n, 4) slots,
  empty boxes as padding. Anchor matching (retinanet_loss.match_anchors), sampling
  (balanced_sample) and both losses over the stacked batch.
- BatchedRoIHeads: exactly batch_size_per_image RoIs an image (fewer only where fewer candidates
  exist, as torchvision), positives first; the box losses over that sample, invalid slots weighted
  0; the mask head on the first `positive cap` slots (128 of 512) with every slot that holds no
  positive weighted 0, RoI pooling by fixed_roi_align: the static way (BatchedRoIHeads.static_shapes),
  off by default: it costs 4x the RoIAlign and about 25% more training FLOPs at full size (128 mask
  slots an image for about 40 positives), which may cost a GPU more than the reads it saves; no GPU
  has measured it yet. By default the pooling and the mask head's slots are torchvision's.

What still waits for the device: NMS. Its output's length depends on the boxes' values (on a GPU
torchvision's kernel copies the suppression mask to the host and finishes the greedy scan there), so
each image's call is one synchronisation. One call over all images with an image offset (the
coordinate trick) does not keep the same boxes: the offset rounds the coordinates, and on full-size
proposals 2 in 81,000 kept boxes (batch 2, 12 trials) and 12 in 82,000 (batch 8, 3 trials) differed
from per-image NMS (benchmarks/maskrcnn_heads_speed.py, offset_nms_mismatches), so NMS stays per image. The mask targets
are the loader's outlines rasterised at 28x28 for the mask slots (mask_targets.py; no read), or,
for targets that carry torchvision's full masks, projected image by image (launches, no read).
BatchedMaskRCNN's training forward also skips torchvision's degenerate-box check (a read an image),
as BatchedRetinaNet's does. Evaluation (model.eval()) is torchvision's code, unchanged."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection._utils import Matcher
from torchvision.models.detection.roi_heads import RoIHeads
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import MultiScaleRoIAlign, boxes as box_ops, roi_align
from torchvision.ops.poolers import _filter_input, _setup_scales

from trainclock.workloads.detection.mask_targets import outline_targets
from trainclock.workloads.detection.retinanet_loss import gather_rows, match_anchors, padded_targets

# fixed_roi_align moves a RoI here on the levels that are not its own: its samples fall below -1 on
# every map (-1e5 x the coarsest scale 1/32), where roi_align's kernels return 0 at a bounds check and
# add no gradient (the torch.where there keeps the own level's values anyway: this only saves work)
FAR_OUTSIDE = -1e5
SMOOTH_L1_BETA = 1 / 9  # torchvision's fastrcnn_loss and RPN loss


def balanced_sample(labels: Tensor, batch: int, positive_fraction: float) -> tuple[Tensor, Tensor, Tensor]:
    """torchvision's BalancedPositiveNegativeSampler at a fixed shape. labels (N, C): >= 1 positive,
    0 negative, anything else neither -> (index (N, S), valid (N, S), positive (N, S)), S = min(batch,
    C): slot j of image i holds candidate index[i, j] where valid[i, j]; the first min(#positives,
    cap) valid slots are positives, cap = int(batch * positive_fraction), the rest negatives, up to
    min(#negatives, S - positives) of them.

    The same distribution as torchvision's (a uniformly random subset of the positives of size
    min(#positives, cap), and independently a uniformly random subset of the negatives of size
    min(#negatives, batch - that)): every candidate draws an independent uniform key; the positives
    with the `cap` largest keys, like the negatives with the largest ones, are then a uniformly
    random subset of their class (the keys are exchangeable), which is what randperm's first k are.
    The keys are float64 so that a tie, which topk would break by position (a bias), has
    probability about C^2 / 2^54."""
    n, c = labels.shape
    size = min(batch, c)
    cap = min(int(batch * positive_fraction), size)
    key = torch.rand(labels.shape, dtype=torch.float64, device=labels.device)
    # a candidate of the other class or of neither keys -1, below every real key in [0, 1)
    pos_key, pos_index = torch.where(labels >= 1, key, -1.0).topk(cap, dim=1)
    neg_key, neg_index = torch.where(labels == 0, key, -1.0).topk(size, dim=1)
    taken = (pos_key >= 0).sum(1, keepdim=True)  # min(#positives, cap), kept on the device
    slot = torch.arange(size, device=labels.device)
    # slot j < taken holds positive j, slot j >= taken negative j - taken: a gather from [positives, negatives]
    from_negatives = slot >= taken
    pick = torch.where(from_negatives, cap + slot - taken, slot)
    keys = torch.cat([pos_key, neg_key], 1).gather(1, pick)
    index = torch.cat([pos_index, neg_index], 1).gather(1, pick)
    valid = keys >= 0
    return index, valid, valid & ~from_negatives


def fixed_roi_align(pooler: MultiScaleRoIAlign, features: dict[str, Tensor], boxes: Tensor,
                    image_shapes: list[tuple[int, int]]) -> Tensor:
    """pooler(features, list(boxes), image_shapes), the same values, for boxes (N, R, 4) -> (N * R, C,
    P, P), without MultiScaleRoIAlign's torch.where per level: every level pools every RoI, those
    mapped to another level moved outside its map, and each RoI keeps its own level's result."""
    if not isinstance(pooler, MultiScaleRoIAlign):
        raise TypeError(f"fixed_roi_align needs a MultiScaleRoIAlign, not {type(pooler).__name__}")
    x = _filter_input(features, pooler.featmap_names)
    if pooler.scales is None or pooler.map_levels is None:  # as the pooler's forward, once
        pooler.scales, pooler.map_levels = _setup_scales(x, image_shapes, pooler.canonical_scale,
                                                         pooler.canonical_level)
    n, r = boxes.shape[:2]
    flat = boxes.reshape(n * r, 4)
    image = torch.arange(n, dtype=flat.dtype, device=flat.device).view(n, 1).expand(n, r).reshape(n * r, 1)
    if len(x) == 1:
        return roi_align(x[0], torch.cat([image, flat], 1), pooler.output_size, pooler.scales[0],
                         pooler.sampling_ratio)
    levels = pooler.map_levels([flat])
    result = None
    for level, (feature, scale) in enumerate(zip(x, pooler.scales)):
        here = levels == level
        rois = torch.cat([image, torch.where(here.unsqueeze(1), flat, FAR_OUTSIDE)], 1)
        pooled = roi_align(feature, rois, pooler.output_size, scale, pooler.sampling_ratio).to(x[0].dtype)
        result = pooled if result is None else torch.where(here.view(-1, 1, 1, 1), pooled, result)
    return result


def _unit_box(like: Tensor) -> Tensor:
    """(0, 0, 1, 1) on like's device, by fills: torch.tensor(...) would be a host-to-device copy."""
    return torch.cat([like.new_zeros(2), like.new_ones(2)])


def _image_bounds(image_shapes: list[tuple[int, int]], like: Tensor) -> Tensor:
    """(N, 1, 4) of (w, h, w, h) per image. The sizes are host ints: a plain copy to a GPU waits for
    its queue (a blocking copy synchronises the stream), one from pinned memory does not."""
    bounds = torch.tensor([[w, h, w, h] for h, w in image_shapes], dtype=like.dtype,
                          pin_memory=like.device.type == "cuda")
    return bounds.to(like.device, non_blocking=True).unsqueeze(1)


class BatchedRPN(RegionProposalNetwork):
    """torchvision's RegionProposalNetwork (same modules and settings) whose training path works on
    the stacked batch; its evaluation path is torchvision's."""

    def filter_proposals(self, proposals: Tensor, objectness: Tensor, image_shapes: list[tuple[int, int]],
                         num_anchors_per_level: list[int]) -> tuple[list[Tensor], list[Tensor]]:
        """Training: (N boxes (post_nms_top_n, 4), N scores (post_nms_top_n,)), each image's NMS
        survivors by decreasing score as torchvision's, then empty boxes (score 0) as padding."""
        if not self.training:
            return super().filter_proposals(proposals, objectness, image_shapes, num_anchors_per_level)
        n = proposals.shape[0]
        boxes, scores, levels = self._top_candidates(proposals, objectness.detach().reshape(n, -1),
                                                     num_anchors_per_level)
        boxes = torch.minimum(boxes.clamp(min=0), _image_bounds(image_shapes, boxes))  # clip_boxes_to_image
        wh = boxes[..., 2:] - boxes[..., :2]
        valid = (wh >= self.min_size).all(-1) & (scores >= self.score_thresh)  # remove_small_boxes, score
        # a dropped box becomes empty (0, 0, 0, 0): IoU 0 with every box, so it suppresses none and
        # is suppressed by none, and the boxes around it keep exactly their fate and order
        boxes = torch.where(valid.unsqueeze(-1), boxes, 0.0)
        # the one host synchronisation: NMS's output length; per image, torchvision's own call
        # (batched_nms over this image's levels), so the survivors are the same
        keeps = [box_ops.batched_nms(b, s, lv, self.nms_thresh) for b, s, lv in zip(boxes, scores, levels)]
        return self._best_kept(boxes, scores, valid, keeps)

    def _top_candidates(self, proposals: Tensor, objectness: Tensor,
                        num_anchors_per_level: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """torchvision's per-level top min(pre_nms_top_n, level's anchors), laid out as its (level by
        level, each by decreasing objectness), from one topk over (N, levels, widest level): boxes
        (N, R, 4), sigmoid scores (N, R), levels (N, R)."""
        n, widest = proposals.shape[0], max(num_anchors_per_level)
        k = min(self.pre_nms_top_n(), widest)
        # levels padded to the widest with -inf (below every logit): a level narrower than k yields
        # all its anchors first, then padding, cut off below by shape alone
        padded = torch.stack([F.pad(o, (0, widest - o.shape[1]), value=float("-inf"))
                              for o in objectness.split(num_anchors_per_level, 1)], 1)
        top, index = padded.topk(k, dim=2)  # (N, L, k)
        # each level's first min(k, its anchors) are real: the same count as torchvision's, so its
        # batched_nms picks the same algorithm (it decides by the number of boxes)
        kept = [min(k, a) for a in num_anchors_per_level]
        starts = [sum(num_anchors_per_level[:lv]) for lv in range(len(kept))]
        anchor = torch.cat([index[:, lv, :m] + start for lv, (m, start) in enumerate(zip(kept, starts))], 1)
        levels = torch.cat([torch.full((n, m), lv, dtype=torch.int64, device=proposals.device)
                            for lv, m in enumerate(kept)], 1)
        scores = torch.sigmoid(torch.cat([top[:, lv, :m] for lv, m in enumerate(kept)], 1))
        return gather_rows(proposals, anchor), scores, levels

    def _best_kept(self, boxes: Tensor, scores: Tensor, valid: Tensor,
                   keeps: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        """Each image's first post_nms_top_n valid survivors (keeps are by decreasing score) into
        (post_nms_top_n, 4) slots, at a shape the keeps' lengths alone decide."""
        n, r = valid.shape
        post = self.post_nms_top_n()
        keep = torch.nn.utils.rnn.pad_sequence(keeps, batch_first=True, padding_value=r)  # r: past the end
        survivor = torch.cat([valid, valid.new_zeros(n, 1)], 1).gather(1, keep)
        rank = survivor.cumsum(1) - 1
        # a survivor ranked under post goes to slot rank, anything else to slot `post`, cut off below
        slot = torch.where(survivor & (rank < post), rank, post)
        source = keep.clamp(max=r - 1)
        out_boxes = boxes.new_zeros(n, post + 1, 4).scatter_(1, slot.unsqueeze(-1).expand(-1, -1, 4),
                                                             gather_rows(boxes, source))
        out_scores = scores.new_zeros(n, post + 1).scatter_(1, slot, scores.gather(1, source))
        return list(out_boxes[:, :post].unbind(0)), list(out_scores[:, :post].unbind(0))

    def assign_targets_to_anchors(self, anchors: list[Tensor],
                                  targets: list[dict[str, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        """torchvision's labels (1, 0, -1 between the thresholds) for every image at once; an anchor
        that matches no box is its own matched box, so its regression target is 0, not log(0)."""
        boxes, _, real = padded_targets(targets)
        stacked = torch.stack(anchors)
        matched = match_anchors(boxes.to(stacked.dtype), real, stacked, self.proposal_matcher)
        foreground = matched >= 0
        labels = torch.where(foreground, 1.0, torch.where(matched == Matcher.BETWEEN_THRESHOLDS, -1.0, 0.0))
        own_box = gather_rows(boxes.to(stacked.dtype), matched.clamp(min=0))
        matched_boxes = torch.where(foreground.unsqueeze(-1), own_box, stacked)
        return list(labels.unbind(0)), list(matched_boxes.unbind(0))

    def compute_loss(self, objectness: Tensor, pred_bbox_deltas: Tensor, labels: list[Tensor],
                     regression_targets: list[Tensor]) -> tuple[Tensor, Tensor]:
        """torchvision's two losses over the same kind of sample (balanced_sample), for the whole batch."""
        label = torch.stack(labels)
        n, a = label.shape
        index, valid, positive = balanced_sample(label.long(), self.fg_bg_sampler.batch_size_per_image,
                                                 self.fg_bg_sampler.positive_fraction)
        count = valid.sum().clamp(min=1)  # torchvision's sampled_inds.numel(), over the batch
        logits = objectness.reshape(n, a).gather(1, index).float()
        objectness_loss = torch.where(
            valid, F.binary_cross_entropy_with_logits(logits, label.gather(1, index), reduction="none"), 0.0)
        deltas = gather_rows(pred_bbox_deltas.reshape(n, a, 4), index).float()
        target = gather_rows(torch.stack(list(regression_targets)), index)
        box = F.smooth_l1_loss(deltas, target, beta=SMOOTH_L1_BETA, reduction="none").sum(-1)
        return objectness_loss.sum() / count, torch.where(positive, box, 0.0).sum() / count


class RoISample(NamedTuple):
    """The RoI heads' training sample, slot by slot: (N, S) unless said."""

    index: Tensor  # into the image's candidates: its proposals (padded), then its ground-truth boxes (padded)
    boxes: Tensor  # (N, S, 4); an invalid slot holds the unit box (0, 0, 1, 1), finite everywhere
    labels: Tensor  # the matched box's class for a positive, else 0
    matched: Tensor  # the matched ground-truth box of a positive, else 0
    valid: Tensor
    positive: Tensor
    regression_targets: Tensor  # (N * S, 4), 0 where the slot is not positive


class BatchedRoIHeads(RoIHeads):
    """torchvision's RoIHeads (same modules and settings) whose training path samples, pools and
    computes the box and mask losses at fixed shapes; evaluation is torchvision's forward.

    static_shapes chooses how the sample is pooled and which slots the mask head runs on. Static: fixed_roi_align, and the mask head on all `cap` first slots,
    those with no positive weighted 0; no host read. Dynamic: torchvision's pooler and the mask
    head on the positives alone. A CPU has no queue that a read drains, and the static way costs it
    4x the RoIAlign (every RoI on every level) and the mask head on every slot: 2.5x the CPU time of
    a maskrcnn-tiny step, 1.5x at full size, and a maskrcnn-tiny run took 2.4x as long; on a GPU it
    is unmeasured (see the module's note), so it is off unless set. Both ways give the same losses."""

    static_shapes: bool = False

    def forward(self, features: dict[str, Tensor], proposals: list[Tensor], image_shapes: list[tuple[int, int]],
                targets: list[dict[str, Tensor]] | None = None) -> tuple[list[dict[str, Tensor]], dict[str, Tensor]]:
        if not self.training:
            return super().forward(features, proposals, image_shapes, targets)
        if self.keypoint_roi_pool is not None:
            raise TypeError("BatchedRoIHeads trains boxes and masks, not keypoints")
        self.check_targets(targets)
        for t in targets:
            if t["boxes"].dtype not in (torch.float, torch.double, torch.half):
                raise TypeError(f"target boxes must of float type, instead got {t['boxes'].dtype}")
            if t["labels"].dtype != torch.int64:
                raise TypeError(f"target labels must of int64 type, instead got {t['labels'].dtype}")
        sample = self.select_fixed_samples(proposals, targets)
        static = self.static_shapes

        def pool(pooler: MultiScaleRoIAlign, boxes: Tensor | list[Tensor]) -> Tensor:
            if static:
                return fixed_roi_align(pooler, features, boxes, image_shapes)
            return pooler(features, list(boxes), image_shapes)

        box_features = self.box_head(pool(self.box_roi_pool, sample.boxes))
        class_logits, box_regression = self.box_predictor(box_features)
        loss_classifier, loss_box_reg = self.box_losses(class_logits, box_regression, sample)
        losses = {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}
        if self.has_mask():
            cap = min(int(self.fg_bg_sampler.batch_size_per_image * self.fg_bg_sampler.positive_fraction),
                      sample.labels.shape[1])
            # balanced_sample puts the positives first: the first `cap` slots hold all of them
            slots = [sample.boxes[:, :cap], sample.matched[:, :cap], sample.labels[:, :cap], sample.positive[:, :cap]]
            if not static:  # the positives alone, image by image (boolean indexing: a read, free on a CPU)
                keep = slots[3]
                slots = [[x[k] for x, k in zip(part, keep)] for part in slots]
            boxes, rows, labels, positive = slots
            mask_logits = self.mask_predictor(self.mask_head(pool(self.mask_roi_pool, boxes)))
            # outlines (the loader's) rasterised per slot; torchvision's full masks where a caller gives those
            make_targets = outline_targets if "mask_edges" in targets[0] else project_masks
            mask_targets = make_targets(targets, boxes, rows, positive, mask_logits.shape[-1])
            losses["loss_mask"] = mask_loss(mask_logits, torch.cat(list(labels)), mask_targets,
                                            torch.cat(list(positive)))
        return [], losses

    def check_targets(self, targets: list[dict[str, Tensor]] | None) -> None:
        """torchvision's check, where a mask model's targets carry full masks or outlines (mask_targets.py)."""
        if targets is None:
            raise ValueError("targets should not be None")
        for key in ("boxes", "labels"):
            if not all(key in t for t in targets):
                raise ValueError(f"Every element of targets should have a {key} key")
        if self.has_mask() and not all("masks" in t or "mask_edges" in t for t in targets):
            raise ValueError("Every element of targets should have a masks or mask_edges key")

    def select_fixed_samples(self, proposals: list[Tensor], targets: list[dict[str, Tensor]]) -> RoISample:
        """torchvision's select_training_samples over the stacked batch: the ground-truth boxes join
        the proposals, each candidate is matched (IoU >= 0.5 a positive of the box's class, else a
        negative), balanced_sample draws the slots. A proposal of zero area is padding, never drawn
        (the RPN's proposals are at least min_size wide and high)."""
        dtype = proposals[0].dtype
        gt_boxes, gt_labels, real = padded_targets(targets)
        gt_boxes = gt_boxes.to(dtype)
        props = torch.nn.utils.rnn.pad_sequence(proposals, batch_first=True)  # zero boxes as padding
        candidates = torch.cat([props, gt_boxes], 1)
        wh = props[..., 2:] - props[..., :2]
        usable = torch.cat([(wh > 0).all(-1), real], 1)
        matched = match_anchors(gt_boxes, real, candidates, self.proposal_matcher)
        label = torch.where(matched >= 0, gt_labels.gather(1, matched.clamp(min=0)), 0)
        # torchvision's sampler classes: >= 1 positive, 0 negative, -1 between the thresholds or padding
        sampler_label = torch.where(usable & (matched != Matcher.BETWEEN_THRESHOLDS), label, -1)
        index, valid, positive = balanced_sample(sampler_label, self.fg_bg_sampler.batch_size_per_image,
                                                 self.fg_bg_sampler.positive_fraction)
        boxes = torch.where(valid.unsqueeze(-1), gather_rows(candidates, index), _unit_box(candidates))
        gt_row = torch.where(positive, matched.gather(1, index), 0)
        labels = torch.where(positive, label.gather(1, index), 0)
        # a slot that is not positive regresses onto its own box: a target of 0, masked out anyway
        reference = torch.where(positive.unsqueeze(-1), gather_rows(gt_boxes, gt_row), boxes)
        targets_ = self.box_coder.encode_single(reference.reshape(-1, 4), boxes.reshape(-1, 4))
        return RoISample(index, boxes, labels, gt_row, valid, positive, targets_)

    def box_losses(self, class_logits: Tensor, box_regression: Tensor, sample: RoISample) -> tuple[Tensor, Tensor]:
        """fastrcnn_loss over the valid slots: cross-entropy averaged over them, the smooth L1 of the
        positives' own-class regression summed and divided by their number too."""
        valid, positive = sample.valid.flatten(), sample.positive.flatten()
        labels = sample.labels.flatten()
        count = valid.sum().clamp(min=1)
        ce = F.cross_entropy(class_logits.float(), labels, reduction="none")
        own = box_regression.float().reshape(labels.shape[0], -1, 4).gather(
            1, labels.view(-1, 1, 1).expand(-1, 1, 4)).squeeze(1)
        box = F.smooth_l1_loss(own, sample.regression_targets, beta=SMOOTH_L1_BETA, reduction="none").sum(-1)
        return torch.where(valid, ce, 0.0).sum() / count, torch.where(positive, box, 0.0).sum() / count


def project_masks(targets: list[dict[str, Tensor]], boxes: Tensor | list[Tensor], gt_row: Tensor | list[Tensor],
                  positive: Tensor | list[Tensor], size: int) -> Tensor:
    """torchvision's project_masks_on_boxes for the mask slots, image by image (N, K) or N lists of
    K_i: each slot's ground-truth mask cropped to its box and resized to size x size by roi_align,
    (all slots, size, size). One roi_align an image, on the image's own masks (padding them to a
    common size would change the samples that fall in a border pixel): launches, no read. A slot
    with no positive pools the unit box of mask 0 (cheap; its target is never used)."""
    out = []
    for t, b, row, pos in zip(targets, boxes, gt_row, positive):
        masks = t["masks"]
        if masks.shape[0] == 0:  # an image without boxes: a blank mask to point at
            masks = masks.new_zeros(1, 1, 1)
        box = torch.where(pos.unsqueeze(-1), b, _unit_box(b))
        rois = torch.cat([row.to(b.dtype).unsqueeze(1), box], 1)
        out.append(roi_align(masks[:, None].to(rois), rois, (size, size), 1.0)[:, 0])
    return torch.cat(out)


def mask_loss(mask_logits: Tensor, labels: Tensor, mask_targets: Tensor, positive: Tensor) -> Tensor:
    """maskrcnn_loss over the positive slots (labels, positive: one a slot): binary cross-entropy of
    each positive's own-class logits, averaged over the positives' pixels (0 with no positive, as
    torchvision's)."""
    positive = positive.flatten()
    own = mask_logits.gather(1, labels.reshape(-1, 1, 1, 1).expand(-1, 1, *mask_logits.shape[-2:])).squeeze(1)
    bce = F.binary_cross_entropy_with_logits(own.float(), mask_targets, reduction="none").sum((1, 2))
    pixels = positive.sum().clamp(min=1) * mask_targets.shape[-2] * mask_targets.shape[-1]
    return torch.where(positive, bce, 0.0).sum() / pixels


class BatchedMaskRCNN(MaskRCNN):
    """torchvision's MaskRCNN (the same arguments, modules and state dict) with a BatchedRPN and
    BatchedRoIHeads: the two subclasses add methods only, so the modules torchvision builds from
    the arguments become them in place."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if type(self.rpn) is not RegionProposalNetwork or type(self.roi_heads) is not RoIHeads:
            raise TypeError("BatchedMaskRCNN replaces torchvision's own RPN and RoI heads only")
        self.rpn.__class__, self.roi_heads.__class__ = BatchedRPN, BatchedRoIHeads

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None):
        if not self.training:
            return super().forward(images, targets)
        if targets is None:
            raise ValueError("Mask R-CNN trains on targets: pass them with the images")
        # torchvision's training forward less its check for degenerate boxes, a host read an image,
        # as BatchedRetinaNet's: the data reader drops every box without width or height in float32
        # (data/layout.py), and the resize scales widths by a positive factor
        images, targets = self.transform(images, targets)
        features = self.backbone(images.tensors)
        proposals, proposal_losses = self.rpn(images, features, targets)
        _, detector_losses = self.roi_heads(features, proposals, images.image_sizes, targets)
        return {**detector_losses, **proposal_losses}  # torchvision's order: the losses add up the same
