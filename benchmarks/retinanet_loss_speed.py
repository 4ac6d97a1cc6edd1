"""RetinaNet's loss at full size on the CPU: trainclock's batched head (workloads/detection/
retinanet_loss.py: the whole batch at once, no one-hot, no host read) against torchvision's
RetinaNetHead.compute_loss (a Python loop over the images, a one-hot target of every anchor x
class, boolean-mask indexing), on the same inputs in the same run, alternating. Only the loss is
timed, forward and backward to the head outputs; the anchor matching before it is the same for both
and done once.

Full size: retinanet-resnext50's 800x800 images, 120,087 anchors (P3-P7, 9 a location), 264
OpenImages classes, about 7 boxes an image (--boxes).
Times are CPU seconds of this process (time.process_time, all threads), so another job's load
changes them less than wall time would.

  python benchmarks/retinanet_loss_speed.py [--batch 2] [--boxes 7] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
from torchvision.models.detection._utils import Matcher
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.retinanet import RetinaNetHead
from torchvision.ops import box_iou

from timing import cpu_timed
from trainclock.device import system
from trainclock.workloads.detection.retinanet_loss import BatchedRetinaNetHead

SIDE, CLASSES, STRIDES = 800, 264, (8, 16, 32, 64, 128)


def full_size_anchors(batch: int) -> list[torch.Tensor]:
    """The model's anchors (model.py's _anchors at anchor_base 32) for a batch of 800x800 images."""
    sizes = tuple(tuple(int(32 * 2 ** k * 2 ** (i / 3)) for i in range(3)) for k in range(5))
    generator = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * 5)
    images = ImageList(torch.zeros(batch, 1, SIDE, SIDE), [(SIDE, SIDE)] * batch)
    maps = [torch.zeros(batch, 1, -(-SIDE // s), -(-SIDE // s)) for s in STRIDES]
    return generator(images, maps)


def problem(batch: int, boxes: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    anchors = full_size_anchors(batch)
    targets = []
    for _ in range(batch):
        n = boxes
        xy = torch.rand(n, 2, generator=g) * SIDE * 0.6
        wh = 24 + torch.rand(n, 2, generator=g) * SIDE * 0.35
        targets.append({"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(0, CLASSES, (n,), generator=g)})
    matcher = Matcher(0.5, 0.4, allow_low_quality_matches=True)  # RetinaNet's
    matched = [matcher(box_iou(t["boxes"], a)) if len(t["boxes"]) else torch.full((len(a),), -1)
               for t, a in zip(targets, anchors)]
    # logits near the classification head's prior (bias -log(99)), as at the start of training
    outputs = {"cls_logits": (torch.randn(batch, len(anchors[0]), CLASSES, generator=g) - 4.6).requires_grad_(),
               "bbox_regression": (torch.randn(batch, len(anchors[0]), 4, generator=g) * 0.5).requires_grad_()}
    return targets, outputs, anchors, matched


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--boxes", type=int, default=7, help="ground-truth boxes in each image")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.manual_seed(0)
    targets, outputs, anchors, matched = problem(args.batch, args.boxes)
    inputs = list(outputs.values())
    heads = {"batched": BatchedRetinaNetHead(8, 9, CLASSES), "torchvision": RetinaNetHead(8, 9, CLASSES)}

    def step(head: RetinaNetHead) -> tuple[list[float], list[torch.Tensor]]:
        losses = head.compute_loss(targets, outputs, anchors, matched)
        grads = torch.autograd.grad(sum(losses.values()), inputs)
        return [float(v.detach()) for v in losses.values()], list(grads)

    (ours, our_grads), (theirs, their_grads) = step(heads["batched"]), step(heads["torchvision"])
    loss_gap = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
    grad_gap = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(our_grads, their_grads))
    fg = int(sum((m >= 0).sum() for m in matched))
    print(f"machine: {system.cpu_model()}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}, "
          f"torch {torch.__version__}; {args.batch} images x {len(anchors[0]):,} anchors x {CLASSES} classes, "
          f"{args.boxes} boxes an image, {fg} foreground anchors")
    print(f"losses (classification, box): {ours[0]:.6f}, {ours[1]:.6f} vs {theirs[0]:.6f}, {theirs[1]:.6f}; "
          f"largest relative difference {loss_gap:.1e}, of the gradients (to their largest) {grad_gap:.1e}")
    times = {name: [] for name in heads}
    for r in range(args.repeats):
        for name, head in heads.items():
            times[name].append(cpu_timed(lambda: step(head), 2))
        print(f"round {r + 1}: batched {times['batched'][-1] * 1e3:.0f} ms, torchvision "
              f"{times['torchvision'][-1] * 1e3:.0f} ms CPU a call (forward + backward); "
              f"load {os.getloadavg()[0]:.1f}")
    o, t = statistics.median(times["batched"]), statistics.median(times["torchvision"])
    print(f"median of {args.repeats}: {o * 1e3:.0f} ms vs {t * 1e3:.0f} ms CPU a call, {t / o:.1f}x less CPU time")


if __name__ == "__main__":
    main()
