"""Mask R-CNN's fixed-shape training step (workloads/detection/maskrcnn_heads.py) against torchvision's:
the same sampling distribution, the same losses and gradients given the same sample, the same RPN
proposals, the same RoI pooling and evaluation, and no read of the device's values but NMS."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils
from scipy.stats import chisquare
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                           FakeTensorMode)
from torch.utils._python_dispatch import TorchDispatchMode
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
from torchvision.models.detection._utils import BalancedPositiveNegativeSampler
from torchvision.models.detection.roi_heads import RoIHeads, project_masks_on_boxes
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import MultiScaleRoIAlign

from trainclock.workloads.detection import maskrcnn_heads
from trainclock.workloads.detection.data.outlines import outlines
from trainclock.workloads.detection.maskrcnn_heads import (BatchedMaskRCNN, BatchedRoIHeads, BatchedRPN,
                                                           balanced_sample, fixed_roi_align, project_masks)
from trainclock.workloads.detection.model import build_model
from trainclock.workloads.detection.spec import get_member

SHAPE = get_member("maskrcnn-tiny", "maskrcnn").shape  # roi_batch 32: at most 8 positives an image
SIZES = ((64, 64), (48, 64), (64, 40))  # (h, w): a tier keeps each image's aspect
BOXES = (9, 2, 0)  # the last image has no object


def _targets(g: torch.Generator) -> list[dict[str, torch.Tensor]]:
    out = []
    for (h, w), n in zip(SIZES, BOXES):
        xy = torch.rand(n, 2, generator=g) * torch.tensor([w, h]) * 0.6
        wh = 8 + torch.rand(n, 2, generator=g) * torch.tensor([w, h]) * 0.3
        boxes = torch.cat([xy, xy + wh], 1)
        masks = torch.zeros(n, h, w, dtype=torch.uint8)
        for i, (x1, y1, x2, y2) in enumerate(boxes.round().int().tolist()):
            masks[i, y1 + 1:y2, x1:x2 - 2] = 1  # off the box's edges a little: targets differ from a full box
            masks[i, y1 + 3:y2 - 2, x1 + 2:x1 + 4] = 0
        out.append({"boxes": boxes, "labels": torch.randint(1, SHAPE.num_classes, (n,), generator=g), "masks": masks})
    return out


def _proposals(targets, g: torch.Generator, count: int = 60) -> list[torch.Tensor]:
    """count boxes an image: two jittered copies of each ground-truth box (positives: with the boxes
    themselves more than the 8 allowed in the first image, fewer in the second), the rest anywhere
    (mostly negatives), clipped, each at least 1 pixel."""
    out = []
    for (h, w), t in zip(SIZES, targets):
        boxes = t["boxes"]
        near = boxes.repeat(2, 1) + torch.randn(2 * len(boxes), 4, generator=g) * 2
        xy = torch.rand(count - len(near), 2, generator=g) * torch.tensor([w, h]) * 0.7
        anywhere = torch.cat([xy, xy + 3 + torch.rand(len(xy), 2, generator=g) * 6], 1)
        p = torch.cat([near, anywhere])
        p[:, 0::2], p[:, 1::2] = p[:, 0::2].clamp(0, w), p[:, 1::2].clamp(0, h)
        p[:, 2:] = torch.maximum(p[:, 2:], p[:, :2] + 1)
        out.append(p)
    return out


def _models() -> tuple[MaskRCNN, MaskRCNN]:
    """(ours, torchvision's) on the same weights, both training."""
    torch.manual_seed(0)
    ours = build_model(SHAPE)
    reference = build_model(SHAPE)
    reference.load_state_dict(ours.state_dict())
    reference.__class__, reference.rpn.__class__, reference.roi_heads.__class__ = (MaskRCNN, RegionProposalNetwork,
                                                                                   RoIHeads)
    return ours.train(), reference.train()


def _images(g: torch.Generator) -> list[torch.Tensor]:
    return [torch.rand(3, h, w, generator=g) for h, w in SIZES]


class Recorded:
    """balanced_sample, recording what it draws: the sample to force on torchvision."""

    def __init__(self) -> None:
        self.samples: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def __call__(self, labels, batch, positive_fraction):
        out = balanced_sample(labels, batch, positive_fraction)
        self.samples.append(out)
        return out


class ForcedSampler(BalancedPositiveNegativeSampler):
    """torchvision's sampler drawing a given sample (index, valid, positive) instead of a random
    one; it checks that torchvision labelled the candidates as ours did."""

    def __init__(self, sample, batch: int, fraction: float) -> None:
        super().__init__(batch, fraction)
        self.index, self.valid, self.positive = sample

    def __call__(self, labels: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        positives, negatives = [], []
        for label, index, valid, positive in zip(labels, self.index, self.valid, self.positive):
            pos, neg = index[valid & positive], index[valid & ~positive]
            assert (label[pos] >= 1).all() and (label[neg] == 0).all()
            positives.append(torch.zeros_like(label, dtype=torch.uint8).index_fill_(0, pos, 1))
            negatives.append(torch.zeros_like(label, dtype=torch.uint8).index_fill_(0, neg, 1))
        return positives, negatives


def _grads(loss: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    grads = torch.autograd.grad(loss, inputs, retain_graph=True, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


def _assert_same(loss, want, grads, want_grads) -> None:
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=0)
    for grad, want_grad in zip(grads, want_grads):
        # per-element differences below 1e-5 of the gradient's largest are rounding (sums in another order)
        torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-5 * float(want_grad.abs().max()) + 1e-12)


# -- the sampler ---------------------------------------------------------------------------------

def _labels(trials: int, positives: int, negatives: int, ignored: int) -> torch.Tensor:
    """trials rows of the same candidates: positives of classes 1-4, then negatives, then ignored ones."""
    classes = torch.arange(positives) % 4 + 1
    row = torch.cat([classes, torch.zeros(negatives, dtype=torch.int64), torch.full((ignored,), -1)])
    return row.expand(trials, -1).clone()


def _subset_counts(picked: list[list[int]], pool: list[int], k: int) -> list[int]:
    counts = {s: 0 for s in combinations(pool, k)}
    for s in picked:
        counts[tuple(sorted(s))] += 1
    return list(counts.values())


@pytest.mark.parametrize("who", ["ours", "torchvision"])
@pytest.mark.parametrize("positives, negatives", [(6, 8), (1, 9)])
def test_the_sample_is_a_uniform_subset_of_each_class_of_torchvisions_sizes(who: str, positives: int,
                                                                           negatives: int):
    """A batch of 8, at most 2 positives: (6, 8) draws 2 of 6 positives (15 pairs) and 6 of 8
    negatives (28 sets), (1, 9) its one positive and 7 of 9 negatives (36 sets). Every draw has
    torchvision's sizes; over 6,000 draws with a fixed seed each possible set is as frequent as the
    others (chi-square, p > 0.001), for our sampler as for torchvision's."""
    trials = 6000
    labels = _labels(trials, positives, negatives, ignored=3)
    torch.manual_seed(positives)
    if who == "ours":
        index, valid, positive = balanced_sample(labels, 8, 0.25)
        assert index.shape == (trials, 8)
        rows = [(i[v & s].tolist(), i[v & ~s].tolist()) for i, v, s in zip(index, valid, positive)]
    else:
        sampler = BalancedPositiveNegativeSampler(8, 0.25)
        rows = []
        for label in labels:
            pos, neg = sampler([label])
            rows.append((pos[0].nonzero().flatten().tolist(), neg[0].nonzero().flatten().tolist()))
    want_pos = min(positives, 2)
    want_neg = min(negatives, 8 - want_pos)
    assert all(len(a) == want_pos and len(b) == want_neg for a, b in rows)
    pools = list(range(positives)), list(range(positives, positives + negatives))
    assert all(set(a) <= set(pools[0]) and set(b) <= set(pools[1]) for a, b in rows)
    for picked, pool, k in (([a for a, _ in rows], pools[0], want_pos), ([b for _, b in rows], pools[1], want_neg)):
        counts = _subset_counts(picked, pool, k)
        if len(counts) > 1:
            assert chisquare(counts).pvalue > 1e-3, counts


def test_a_sampler_with_a_bias_fails_that_test():
    """The test above can fail: preferring the lower-numbered positive 60:40 is caught."""
    g = torch.Generator().manual_seed(0)
    picks = [[0] if torch.rand(1, generator=g) < 0.6 else [1] for _ in range(6000)]
    assert chisquare(_subset_counts(picks, [0, 1], 1)).pvalue < 1e-3


def test_the_sample_has_positives_first_and_never_draws_ignored_candidates():
    labels = torch.tensor([[0, 3, -1, 2, 0, 0, 1, -1, 0, 4],  # 4 positives, 4 negatives
                           [-1, -1, 0, 0, 0, -1, -1, -1, -1, -1],  # no positive, 3 negatives
                           [1, 1, 1, 1, 1, 1, 1, 1, 1, 0]])  # 9 positives, one negative
    torch.manual_seed(0)
    index, valid, positive = balanced_sample(labels, 8, 0.25)  # cap 2
    assert valid.sum(1).tolist() == [6, 3, 3] and positive.sum(1).tolist() == [2, 0, 2]
    for i in range(3):
        taken = int(positive[i].sum())
        assert positive[i, :taken].all() and not positive[i, taken:].any()  # positives first
        assert valid[i, :int(valid[i].sum())].all()  # then negatives, then invalid slots
        drawn = labels[i, index[i][valid[i]]]
        assert (drawn >= 0).all() and len(set(index[i][valid[i]].tolist())) == int(valid[i].sum())
    # fewer candidates than the batch: as many slots as candidates, all the usable ones drawn
    index, valid, positive = balanced_sample(labels[:, :5], 8, 0.25)
    assert index.shape == (3, 5) and valid.sum(1).tolist() == [4, 3, 2] and positive.sum(1).tolist() == [2, 0, 2]


# -- the RoI heads: same sample, same losses ------------------------------------------------------

@pytest.fixture(scope="module")
def roi_problem():
    g = torch.Generator().manual_seed(5)
    ours, reference = _models()
    targets = _targets(g)
    images, _ = ours.transform(_images(g))
    features = {k: v.detach() for k, v in ours.backbone(images.tensors).items()}
    return ours, reference, targets, _proposals(targets, g), features, images.image_sizes


def _run_heads(heads, features, proposals, sizes, targets):
    leaves = {k: v.clone().requires_grad_() for k, v in features.items()}
    _, losses = heads(leaves, [p.clone() for p in proposals], sizes, targets)
    return losses, [*leaves.values(), *heads.parameters()]


@pytest.fixture(scope="module", params=[True, False], ids=["static", "dynamic"])
def roi_losses(roi_problem, request):
    """Both ways of BatchedRoIHeads (static_shapes set and not) against torchvision's RoIHeads
    forced to draw the sample ours drew."""
    ours, reference, targets, proposals, features, sizes = roi_problem
    ours.roi_heads.static_shapes = request.param
    recorder = Recorded()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(maskrcnn_heads, "balanced_sample", recorder)
        got, got_inputs = _run_heads(ours.roi_heads, features, proposals, sizes, targets)
    (sample,) = recorder.samples
    reference.roi_heads.fg_bg_sampler = ForcedSampler(sample, SHAPE.roi_batch, 0.25)
    want, want_inputs = _run_heads(reference.roi_heads, features, proposals, sizes, targets)
    return sample, (got, got_inputs), (want, want_inputs)


def test_the_sample_fills_the_batch_and_caps_the_positives(roi_losses):
    (index, valid, positive), _, _ = roi_losses
    assert index.shape == (3, SHAPE.roi_batch) and valid.all()  # 60 proposals + boxes: enough for 32 slots
    assert positive.sum(1).tolist()[0] == SHAPE.roi_batch // 4  # more positives than the cap: capped
    assert 0 < positive.sum(1).tolist()[1] < SHAPE.roi_batch // 4 and positive.sum(1).tolist()[2] == 0


@pytest.mark.parametrize("name", ["loss_classifier", "loss_box_reg", "loss_mask"])
def test_box_and_mask_losses_and_gradients_equal_torchvisions_on_the_same_sample(roi_losses, name: str):
    _, (got, got_inputs), (want, want_inputs) = roi_losses
    assert got.keys() == want.keys() and want[name].item() > 0
    _assert_same(got[name], want[name], _grads(got[name], got_inputs), _grads(want[name], want_inputs))


def test_mask_targets_equal_project_masks_on_boxes(roi_problem):
    """Each positive slot's target is torchvision's: its box over its ground-truth mask by roi_align."""
    _, _, targets, _, _, _ = roi_problem
    g = torch.Generator().manual_seed(2)
    slots, boxes, rows, positive = 8, [], [], []
    for (h, w), t in zip(SIZES, targets):
        m = len(t["boxes"])
        rows.append(torch.randint(0, max(m, 1), (slots,), generator=g))
        positive.append((torch.rand(slots, generator=g) < 0.7) & (m > 0))
        b = t["boxes"][rows[-1]] if m else torch.zeros(slots, 4)
        b = b + torch.randn(slots, 4, generator=g) * 2
        b[:, 0::2], b[:, 1::2] = b[:, 0::2].clamp(0, w), b[:, 1::2].clamp(0, h)  # some at the image's edge
        boxes.append(b)
    boxes, rows, positive = torch.stack(boxes), torch.stack(rows), torch.stack(positive)
    got = project_masks(targets, boxes, rows, positive, 28).view(len(SIZES), slots, 28, 28)
    assert positive[:2].any(1).all()
    for i, t in enumerate(targets):
        pos = positive[i]
        if pos.any():
            want = project_masks_on_boxes(t["masks"], boxes[i][pos], rows[i][pos], 28)
            assert torch.equal(got[i][pos], want) and want.sum() > 0


@pytest.mark.parametrize("static", [True, False])
def test_a_batch_without_a_positive_has_no_mask_loss(roi_problem, static: bool):
    ours, _, _, proposals, features, sizes = roi_problem
    ours.roi_heads.static_shapes = static
    empty = [{"boxes": torch.zeros(0, 4), "labels": torch.zeros(0, dtype=torch.int64),
              "masks": torch.zeros(0, h, w, dtype=torch.uint8)} for h, w in SIZES]
    losses, _ = _run_heads(ours.roi_heads, features, proposals, sizes, empty)
    assert losses["loss_mask"].item() == 0 and losses["loss_box_reg"].item() == 0
    assert math.isfinite(losses["loss_classifier"].item())
    sum(losses.values()).backward()


def test_fixed_roi_align_equals_multiscale_roi_align():
    g = torch.Generator().manual_seed(3)
    sizes = [(1024, 1280), (896, 1280)]
    features = {str(i): torch.randn(2, 4, 256 >> i, 320 >> i, generator=g) for i in range(4)}
    features["pool"] = torch.randn(2, 4, 16, 20, generator=g)
    # sides from 4 to 700 px, some at the maps' edges: every level of the FPN's P2-P5 gets RoIs
    xy = torch.rand(2, 80, 2, generator=g) * 600
    boxes = torch.cat([xy, xy + 4 + torch.rand(2, 80, 2, generator=g) ** 2 * 696], -1).clamp(max=1280)
    pooler = MultiScaleRoIAlign(["0", "1", "2", "3"], 7, 2)
    leaves = [{k: v.clone().requires_grad_() for k, v in features.items()} for _ in range(2)]
    got = fixed_roi_align(pooler, leaves[0], boxes, sizes)
    want = pooler(leaves[1], list(boxes), sizes)
    assert set(pooler.map_levels([boxes.flatten(0, 1)]).tolist()) == {0, 1, 2, 3}
    assert torch.equal(got, want)
    weight = torch.randn(got.shape, generator=g)
    (got * weight).sum().backward()
    (want * weight).sum().backward()
    for k in "0123":
        torch.testing.assert_close(leaves[0][k].grad, leaves[1][k].grad, rtol=1e-6, atol=1e-6)


# -- the RPN ------------------------------------------------------------------------------------

def _clustered(n: int, count: int, h: int, w: int, g: torch.Generator) -> torch.Tensor:
    """Proposals as a trained RPN makes them: clusters of near-duplicates, some past the image's
    edge, some thinner than the RPN's min_size; (n, count, 4)."""
    centres = torch.rand(n, 30, 2, generator=g) * torch.tensor([w, h])
    sides = torch.exp(torch.rand(n, 30, 2, generator=g) * 5 + 1)
    pick = torch.randint(0, 30, (n, count), generator=g)
    c = centres.gather(1, pick[..., None].expand(-1, -1, 2)) + torch.randn(n, count, 2, generator=g) * 6
    s = sides.gather(1, pick[..., None].expand(-1, -1, 2)) * torch.exp(torch.randn(n, count, 2, generator=g) * 0.15)
    boxes = torch.cat([c - s / 2, c + s / 2], -1)
    thin = torch.rand(n, count, generator=g) < 0.02
    boxes[..., 2] = torch.where(thin, boxes[..., 0] + 1e-4, boxes[..., 2])
    return boxes


@pytest.mark.parametrize("pre, post, score_thresh, cut", [(100, 150, 0.0, True), (100, 1000, 0.4, False),
                                                         (1000, 800, 0.3, True), (1000, 3000, 0.0, False)])
def test_rpn_proposals_are_torchvisions_nms_survivors_in_fixed_slots(pre: int, post: int, score_thresh: float,
                                                                     cut: bool):
    """The same boxes and scores, in the same order, as torchvision's filter_proposals, then empty
    padding: (100 a level) its NMS over each image's levels by the offset trick, (1000) on a CPU
    its NMS level by level; a post_nms_top_n that cuts the survivors and one that does not."""
    ours, reference = _models()
    for rpn in (ours.rpn, reference.rpn):
        rpn._pre_nms_top_n["training"], rpn._post_nms_top_n["training"] = pre, post
        rpn.score_thresh = score_thresh
    g = torch.Generator().manual_seed(pre + post)
    levels = [3000, 1500, 800, 200, 50]
    sizes = [(600, 800), (800, 700)]
    proposals = _clustered(2, sum(levels), 800, 800, g)
    objectness = torch.randn(2 * sum(levels), 1, generator=g)
    got_boxes, got_scores = ours.rpn.filter_proposals(proposals, objectness, sizes, levels)
    want_boxes, want_scores = reference.rpn.filter_proposals(proposals, objectness, sizes, levels)
    for boxes, scores, want, want_score in zip(got_boxes, got_scores, want_boxes, want_scores):
        k = len(want)
        assert boxes.shape == (post, 4) and (k == post) == cut and k > 100
        assert torch.equal(boxes[:k], want) and torch.equal(scores[:k], want_score)
        assert not boxes[k:].any() and not scores[k:].any()


def _rpn_inputs(model: MaskRCNN, g: torch.Generator):
    targets = _targets(g)
    images, targets = model.transform(_images(g), targets)
    features = {k: v.detach() for k, v in model.backbone(images.tensors).items()}
    return images, features, targets


def test_rpn_losses_and_gradients_equal_torchvisions_on_the_same_sample():
    ours, reference = _models()
    images, features, targets = _rpn_inputs(ours, torch.Generator().manual_seed(4))
    recorder = Recorded()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(maskrcnn_heads, "balanced_sample", recorder)
        leaves = {k: v.clone().requires_grad_() for k, v in features.items()}
        got_boxes, got = ours.rpn(images, leaves, targets)
        got_inputs = [*leaves.values(), *ours.rpn.parameters()]
    (sample,) = recorder.samples
    assert sample[0].shape == (3, 256) and sample[2].any()
    reference.rpn.fg_bg_sampler = ForcedSampler(sample, 256, 0.5)
    leaves = {k: v.clone().requires_grad_() for k, v in features.items()}
    want_boxes, want = reference.rpn(images, leaves, targets)
    want_inputs = [*leaves.values(), *reference.rpn.parameters()]
    for boxes, w in zip(got_boxes, want_boxes):
        assert torch.equal(boxes[:len(w)], w) and not boxes[len(w):].any()
    for name in ("loss_objectness", "loss_rpn_box_reg"):
        assert want[name].item() > 0
        _assert_same(got[name], want[name], _grads(got[name], got_inputs), _grads(want[name], want_inputs))


# -- the model ----------------------------------------------------------------------------------

def test_the_maskrcnn_members_use_the_batched_modules_and_keep_torchvisions_state_dict():
    ours, reference = _models()
    assert type(ours) is BatchedMaskRCNN and type(ours.rpn) is BatchedRPN and type(ours.roi_heads) is BatchedRoIHeads
    assert ours.state_dict().keys() == reference.state_dict().keys()


def test_evaluation_detections_are_torchvisions():
    ours, reference = _models()
    g = torch.Generator().manual_seed(6)
    images = _images(g)
    ours.eval(), reference.eval()
    with torch.no_grad():
        got, want = ours(images), reference(images)
    assert sum(len(d["boxes"]) for d in want) > 10
    for a, b in zip(got, want):
        assert a.keys() == b.keys() == {"boxes", "labels", "scores", "masks"}
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_training_step_of_the_model_trains_every_head():
    ours, _ = _models()
    g = torch.Generator().manual_seed(7)
    losses = ours(_images(g), _targets(g))
    assert losses.keys() == {"loss_classifier", "loss_box_reg", "loss_mask", "loss_objectness", "loss_rpn_box_reg"}
    assert all(math.isfinite(v.item()) and v.item() > 0 for v in losses.values())
    sum(losses.values()).backward()
    for head in (ours.rpn.head, ours.roi_heads.box_predictor, ours.roi_heads.mask_predictor):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())


def _outline_targets(g: torch.Generator) -> list[dict[str, torch.Tensor]]:
    """_targets with each mask as the loader carries it: its outline (exact for pixel masks)."""
    out = []
    for t in _targets(g):
        rles = [mask_utils.encode(np.asfortranarray(m.numpy())) for m in t["masks"]]
        out.append({"boxes": t["boxes"], "labels": t["labels"], **outlines(rles)})
    return out


def test_the_training_forward_is_torchvisions_less_its_degenerate_box_check():
    ours, _ = _models()
    g = torch.Generator().manual_seed(7)
    images, targets = _images(g), _outline_targets(g)
    torch.manual_seed(0)
    got = ours(images, targets)
    torch.manual_seed(0)
    want = GeneralizedRCNN.forward(ours, images, targets)
    assert list(got) == list(want) and all(torch.equal(got[k], want[k]) for k in want)


# -- no reads ----------------------------------------------------------------------------------

class DeviceReads(TorchDispatchMode):
    """The ops whose result the host cannot have without the device's values: item() and the like,
    nonzero and other outputs of data-dependent size, boolean-mask indexing, and torchvision's NMS.
    On a GPU each makes the host wait for the device; on a CPU this sees them all the same."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        tags = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)
        masks = func.overloadpacket in (torch.ops.aten.index, torch.ops.aten.index_put, torch.ops.aten.index_put_) \
            and any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in args[1])
        other = func.overloadpacket not in (torch.ops.aten.index, torch.ops.aten.index_put, torch.ops.aten.index_put_) \
            and any(tag in func.tags for tag in tags)
        if masks or other or func.overloadpacket is torch.ops.torchvision.nms:
            self.ops.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _step_reads(model: MaskRCNN, g: torch.Generator) -> list[str]:
    """The reads of the RPN's and RoI heads' forward and backward on one batch."""
    images, features, targets = _rpn_inputs(model, g)
    with DeviceReads() as reads:
        proposals, rpn_losses = model.rpn(images, features, targets)
        _, losses = model.roi_heads(features, proposals, images.image_sizes, targets)
        sum([*rpn_losses.values(), *losses.values()]).backward()
    return reads.ops


def test_the_rpn_and_roi_heads_read_the_device_only_in_nms_once_an_image():
    """The static way (set here), after a first step (the RoI poolers read their scales off the
    maps' sizes once, as torchvision's); the dynamic way (the default) reads in its pooling and
    mask slots, torchvision's everywhere."""
    ours, reference = _models()
    ours.roi_heads.static_shapes = True
    for model in (ours, reference):
        _step_reads(model, torch.Generator().manual_seed(1))
    assert _step_reads(ours, torch.Generator().manual_seed(8)) == ["nms"] * len(SIZES)
    ours.roi_heads.static_shapes = False
    dynamic = _step_reads(ours, torch.Generator().manual_seed(8))
    theirs = _step_reads(reference, torch.Generator().manual_seed(8))
    assert len(SIZES) < len(dynamic) < len(theirs) // 2 and len(theirs) > 10 * len(SIZES)


def test_the_model_with_outlines_reads_the_device_only_in_nms_once_an_image():
    """The whole training forward and backward, the static way, on the loader's outline targets: no
    degenerate-box check (BatchedMaskRCNN.forward), mask targets rasterised without a read."""
    ours, _ = _models()
    ours.roi_heads.static_shapes = True
    g = torch.Generator().manual_seed(9)
    images, targets = _images(g), _outline_targets(g)
    ours(images, targets)  # a first step: the RoI poolers read their scales once
    with DeviceReads() as reads:
        sum(ours(images, targets).values()).backward()
    assert reads.ops == ["nms"] * len(SIZES)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_rpn_loss_and_roi_heads_run_without_values(device: str):
    """Under FakeTensorMode a tensor has no values: a nonzero, a boolean-mask index or an item()
    raises. Our RPN matching, sampling and losses and our RoI heads' static training pass
    (sampling, pooling, box and mask losses) run, the static way set: on a fake GPU (forward only:
    autograd's engine wants a real GPU), and on a CPU, backward too. torchvision's RoI heads do not run."""
    g = torch.Generator().manual_seed(9)
    targets = _targets(g)
    proposals = _proposals(targets, g)
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = lambda t: mode.from_tensor(t).to(device)  # noqa: E731
        f_targets = [{k: fake(v) for k, v in t.items()} for t in targets]
        f_proposals = [fake(p) for p in proposals]
        # made in the mode: fake already
        features = {str(i): torch.randn(3, 32, 16 >> i, 16 >> i, device=device) for i in range(4)}
        features["pool"] = torch.randn(3, 32, 1, 1, device=device)
        with torch.device(device):
            model = build_model(SHAPE).train()
        model.roi_heads.static_shapes = True
        _, losses = model.roi_heads(features, f_proposals, list(SIZES), f_targets)
        anchors = [(torch.rand(500, 4, device=device) * 30).sort(-1).values for _ in SIZES]
        labels, matched = model.rpn.assign_targets_to_anchors(anchors, f_targets)
        rpn_losses = model.rpn.compute_loss(torch.randn(1500, 1, device=device, requires_grad=True),
                                            torch.randn(1500, 4, device=device), labels,
                                            list(model.rpn.box_coder.encode(matched, anchors)))
        total = sum([*losses.values(), *rpn_losses])
        assert total.shape == () and total.device.type == device
        if device == "cpu":
            total.backward()
            assert model.roi_heads.mask_predictor.mask_fcn_logits.weight.grad is not None
        model.roi_heads.__class__ = RoIHeads
        with pytest.raises((DataDependentOutputException, DynamicOutputShapeException)):
            model.roi_heads(features, f_proposals, list(SIZES), f_targets)
