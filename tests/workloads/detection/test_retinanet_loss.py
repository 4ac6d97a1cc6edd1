"""The batched RetinaNet loss (workloads/detection/retinanet_loss.py) against torchvision's per-image
one: the same classification and regression losses and gradients, with no host synchronisation."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import (DataDependentOutputException, DynamicOutputShapeException,
                                           FakeTensorMode)
from torchvision.models.detection._utils import Matcher
from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead
from torchvision.ops import box_iou

from trainclock.workloads.detection.model import build_model
from trainclock.workloads.detection.retinanet_loss import (BatchedRetinaNet, BatchedRetinaNetHead, match_anchors,
                                                           padded_targets)
from trainclock.workloads.detection.spec import get_member

CLASSES, ANCHORS, SIDE = 7, 900, 256.0
BOXES_PER_IMAGE = (4, 0, 6, 1)  # the second image has no boxes


def _boxes(n: int, generator: torch.Generator) -> torch.Tensor:
    xy = torch.rand(n, 2, generator=generator) * SIDE * 0.7
    wh = 8 + torch.rand(n, 2, generator=generator) * SIDE * 0.3
    return torch.cat([xy, xy + wh], 1)


def _problem(seed: int = 0) -> tuple[list[dict[str, torch.Tensor]], dict[str, torch.Tensor], list[torch.Tensor],
                                     list[torch.Tensor]]:
    """Targets, head outputs, anchors and RetinaNet's own matching (IoU 0.5 / 0.4, low-quality
    matches kept): half the anchors jitter the boxes, so foreground, between-threshold and
    background anchors all occur."""
    g = torch.Generator().manual_seed(seed)
    targets = [{"boxes": _boxes(n, g), "labels": torch.randint(0, CLASSES, (n,), generator=g)}
               for n in BOXES_PER_IMAGE]
    everything = torch.cat([t["boxes"] for t in targets])
    near = everything[torch.randint(0, len(everything), (ANCHORS // 2,), generator=g)]
    near = near + torch.randn(near.shape, generator=g) * 6
    near[:, 2:] = torch.maximum(near[:, 2:], near[:, :2] + 2)
    anchor = torch.cat([near, _boxes(ANCHORS - len(near), g)])
    anchors = [anchor.clone() for _ in targets]
    matcher = Matcher(0.5, 0.4, allow_low_quality_matches=True)
    matched = [matcher(box_iou(t["boxes"], a)) if len(t["boxes"]) else torch.full((ANCHORS,), -1)
               for t, a in zip(targets, anchors)]
    n = len(targets)
    outputs = {"cls_logits": (torch.randn(n, ANCHORS, CLASSES, generator=g) * 3 - 2).requires_grad_(),
               "bbox_regression": torch.randn(n, ANCHORS, 4, generator=g).requires_grad_()}
    return targets, outputs, anchors, matched


def _losses_and_grads(head: RetinaNetHead, problem) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    targets, outputs, anchors, matched = problem
    result = {}
    for name, loss in head.compute_loss(targets, outputs, anchors, matched).items():
        grads = torch.autograd.grad(loss, [outputs["cls_logits"], outputs["bbox_regression"]], allow_unused=True)
        grad = grads[0] if name == "classification" else grads[1]
        result[name] = (loss.detach(), grad)
    return result


@pytest.mark.parametrize("loss_type", ["l1", "smooth_l1"])
def test_batched_loss_and_its_gradients_equal_torchvisions(loss_type: str):
    problem = _problem()
    matched = torch.stack(problem[3])
    assert (matched >= 0).any(1).tolist() == [n > 0 for n in BOXES_PER_IMAGE]
    assert (matched == Matcher.BETWEEN_THRESHOLDS).sum() > 20 and (matched == -1).sum() > 100
    labels_hit = {int(problem[0][i]["labels"][j]) for i, j in (matched >= 0).nonzero().tolist()
                  for j in [int(matched[i, j])]}
    assert len(labels_hit) > 2
    reference, ours = RetinaNetHead(8, 9, CLASSES), BatchedRetinaNetHead(8, 9, CLASSES)
    reference.regression_head._loss_type = ours.regression_head._loss_type = loss_type
    expected, got = _losses_and_grads(reference, problem), _losses_and_grads(ours, problem)
    for name in ("classification", "bbox_regression"):
        (loss, grad), (want, want_grad) = got[name], expected[name]
        assert loss.item() > 0
        torch.testing.assert_close(loss, want, rtol=1e-5, atol=0)
        # the gradients' scale: per-element differences below 1e-5 of the largest are rounding
        torch.testing.assert_close(grad, want_grad, rtol=1e-5, atol=1e-5 * float(want_grad.abs().max()))


def test_a_batch_with_no_boxes_at_all_has_no_regression_loss_and_a_finite_focal_loss():
    targets, outputs, anchors, _ = _problem()
    empty = [{"boxes": torch.zeros(0, 4), "labels": torch.zeros(0, dtype=torch.int64)} for _ in targets]
    matched = [torch.full((ANCHORS,), -1) for _ in targets]
    expected = RetinaNetHead(8, 9, CLASSES).compute_loss(empty, outputs, anchors, matched)
    got = BatchedRetinaNetHead(8, 9, CLASSES).compute_loss(empty, outputs, anchors, matched)
    assert got["bbox_regression"].item() == 0
    torch.testing.assert_close(got["classification"], expected["classification"], rtol=1e-5, atol=0)


def test_batched_matching_equals_torchvisions_matcher_image_by_image():
    targets, _, anchors, _ = _problem()
    # a sliver no anchor fits (best IoU under 0.4): only the low-quality step gives it anchors
    targets[0] = {"boxes": torch.cat([targets[0]["boxes"], torch.tensor([[0.0, 250.0, 240.0, 253.0]])]),
                  "labels": torch.cat([targets[0]["labels"], torch.tensor([CLASSES - 1])])}
    boxes, _, real = padded_targets(targets)
    results = []
    for low_quality in (True, False):
        matcher = Matcher(0.5, 0.4, allow_low_quality_matches=low_quality)
        expected = torch.stack([matcher(box_iou(t["boxes"], a)) if len(t["boxes"]) else torch.full((ANCHORS,), -1)
                                for t, a in zip(targets, anchors)])
        results.append(match_anchors(boxes, real, torch.stack(anchors), matcher))
        assert torch.equal(results[-1], expected)
        assert set(results[-1].unique().tolist()) >= {-2, -1, 0, 1, 2, 3}
    assert not torch.equal(*results)


def test_the_batched_loss_reads_nothing_back_from_the_device():
    """Under FakeTensorMode a tensor has no values: a boolean-mask index, a nonzero, an .item() or
    a Python max over a tensor raises. torchvision's loss does all of these; ours runs, backward too,
    and so does the batched matching."""
    targets, outputs, anchors, matched = _problem()
    outputs = {k: v.detach() for k, v in outputs.items()}
    with FakeTensorMode() as mode:
        fake = lambda t: mode.from_tensor(t)  # noqa: E731
        f_targets = [{k: fake(v) for k, v in t.items()} for t in targets]
        f_outputs = {k: fake(v).requires_grad_() for k, v in outputs.items()}
        args = (f_targets, f_outputs, [fake(a) for a in anchors], [fake(m) for m in matched])
        losses = BatchedRetinaNetHead(8, 9, CLASSES).compute_loss(*args)
        sum(losses.values()).backward()
        assert f_outputs["cls_logits"].grad.shape == outputs["cls_logits"].shape
        boxes, _, real = padded_targets(f_targets)
        assert match_anchors(boxes, real, torch.stack(args[2]), Matcher(0.5, 0.4, True)).shape == (4, ANCHORS)
        with pytest.raises((DataDependentOutputException, DynamicOutputShapeException)):
            RetinaNetHead(8, 9, CLASSES).compute_loss(*args)


@pytest.mark.parametrize("batched_matching", [False, True])
def test_the_retinanet_models_use_the_batched_head_and_train_on_the_same_loss(batched_matching: bool):
    shape = get_member("retinanet-tiny", "ssd").shape
    model = build_model(shape)
    assert type(model) is BatchedRetinaNet and type(model.head) is BatchedRetinaNetHead
    if not batched_matching:  # the batched loss after torchvision's per-image matching
        model.__class__ = RetinaNet
    reference = build_model(shape)
    reference.load_state_dict(model.state_dict())
    reference.__class__, reference.head.__class__ = RetinaNet, RetinaNetHead  # the same weights, torchvision's all through
    torch.manual_seed(1)
    images = [torch.rand(3, shape.min_size, shape.min_size) for _ in range(3)]
    boxes = [torch.tensor([[4.0, 6.0, 30.0, 40.0], [20.0, 10.0, 60.0, 28.0]]), torch.zeros(0, 4),
             torch.tensor([[0.0, 0.0, 16.0, 16.0]])]
    targets = [{"boxes": b, "labels": torch.arange(len(b)) + 1} for b in boxes]
    model.train(), reference.train()
    got, want = model(images, targets), reference(images, targets)
    assert got["bbox_regression"] > 0  # some anchors matched a box
    for name in ("classification", "bbox_regression"):
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=0)
