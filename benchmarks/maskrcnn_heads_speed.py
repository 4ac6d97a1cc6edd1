"""Mask R-CNN's training step on the CPU: trainclock's fixed-shape RPN and RoI heads (workloads/
detection/maskrcnn_heads.py: batched sampling and losses, no host read but one NMS an image) against
torchvision's (per-image loops, boolean-mask indexing), on the same weights and the same batches in
the same run, alternating. Ours two ways: `static`, as on a GPU (every RoI pooled on every level,
the mask head on all 128 (tier: 8) mask slots an image), and `cpu`, BatchedRoIHeads' default on a
CPU (torchvision's pooler, the mask head on the positives alone). Two timings each: the whole step
(forward and backward of the model, no optimizer) and the heads alone (the RPN and RoI heads,
forward and backward, on fixed backbone features; everything else is the same code in all).

Shapes: `tier`, maskrcnn-tiny/mini's (the same: a narrow ResNet-FPN32, 64 px images, 11 classes,
100 proposals an image, 32 RoIs an image, 8 mask slots, batch 16); `full`, maskrcnn-r50's (R50-FPN256 from
scratch, 91 classes, 6,000 proposals an image, 512 RoIs, 128 mask slots; batch 2 at 800x1067).
Images and targets are synthetic: random pixels, about 2 (tier) or 7 (full) boxes an image with
masks; the weights are random, so the RPN's proposals are too (positives are mostly the ground-truth
boxes themselves and their near copies).
Times are CPU seconds of this process (time.process_time, all threads), so another job's load
changes them less than wall time would; the load average is printed beside them.

--offset-nms-trials T also checks the claim in maskrcnn_heads.py: one NMS over all images (image x
level offsets, the coordinate trick) against NMS per image and level, on full-size clustered
proposals, 8 images a trial, T trials: the kept boxes that differ.

  python benchmarks/maskrcnn_heads_speed.py [--shape tier|full] [--steps 2] [--repeats 3] [--threads 1]
                                            [--precision fp32|bf16] [--offset-nms-trials 0]
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.roi_heads import RoIHeads
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import boxes as box_ops

from timing import autocast_for, cpu_timed
from trainclock.device import system
from trainclock.workloads.detection.model import build_model
from trainclock.workloads.detection.spec import get_member

SHAPES = {"tier": ("maskrcnn-tiny", 16, (64, 64), 2), "full": ("maskrcnn-r50", 2, (800, 1067), 7)}


def batch(size: int, hw: tuple[int, int], objects: int, classes: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    h, w = hw
    images, targets = [], []
    for _ in range(size):
        n = max(1, int(torch.poisson(torch.tensor(float(objects)), generator=g)))
        xy = torch.rand(n, 2, generator=g) * torch.tensor([w, h]) * 0.7
        wh = (0.05 + torch.rand(n, 2, generator=g) * 0.25) * torch.tensor([w, h])
        boxes = torch.cat([xy, xy + wh], 1)
        masks = torch.zeros(n, h, w, dtype=torch.uint8)
        yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        for i, (x1, y1, x2, y2) in enumerate(boxes.tolist()):  # an ellipse in each box
            cx, cy, rx, ry = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2, (y2 - y1) / 2
            masks[i] = (((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1).to(torch.uint8)
        images.append(torch.rand(3, h, w, generator=g))
        targets.append({"boxes": boxes, "labels": torch.randint(1, classes, (n,), generator=g), "masks": masks})
    return images, targets


def models(member: str) -> dict[str, MaskRCNN]:
    """static, cpu (ours) and torchvision on the same weights."""
    shape = get_member(member, "maskrcnn").shape
    torch.manual_seed(0)
    nets = {"static": build_model(shape).train()}
    for name in ("cpu", "torchvision"):
        nets[name] = build_model(shape).train()
        nets[name].load_state_dict(nets["static"].state_dict())
    nets["static"].roi_heads.static_shapes = True
    theirs = nets["torchvision"]
    theirs.__class__, theirs.rpn.__class__, theirs.roi_heads.__class__ = MaskRCNN, RegionProposalNetwork, RoIHeads
    return nets


def offset_nms_mismatches(trials: int, images: int = 8, levels: int = 5, per_level: int = 1000) -> tuple[int, int]:
    """(kept boxes that differ, kept boxes) between one NMS over every image and level with the
    coordinate trick and NMS per image and level, on clustered proposals at 800x1088."""
    g = torch.Generator().manual_seed(0)
    h, w = 800, 1088
    differ = total = 0
    for _ in range(trials):
        centres = torch.rand(images, 40, 2, generator=g) * torch.tensor([w, h])
        sides = torch.exp(torch.rand(images, 40, 2, generator=g) * 5 + 1)
        pick = torch.randint(0, 40, (images, levels * per_level), generator=g)
        index = pick[..., None].expand(-1, -1, 2)
        c = centres.gather(1, index) + torch.randn(*pick.shape, 2, generator=g) * 8
        s = sides.gather(1, index) * torch.exp(torch.randn(*pick.shape, 2, generator=g) * 0.15)
        boxes = torch.cat([c - s / 2, c + s / 2], -1)
        boxes[..., 0::2], boxes[..., 1::2] = boxes[..., 0::2].clamp(0, w), boxes[..., 1::2].clamp(0, h)
        scores = torch.rand(pick.shape, generator=g)
        level = torch.arange(levels).repeat_interleave(per_level)
        group = (torch.arange(images)[:, None] * levels + level).flatten()
        joint = box_ops._batched_nms_coordinate_trick(boxes.flatten(0, 1), scores.flatten(), group, 0.7).tolist()
        for i in range(images):
            alone = set(box_ops._batched_nms_vanilla(boxes[i], scores[i], level, 0.7).tolist())
            mine = {k - i * levels * per_level for k in joint if k // (levels * per_level) == i}
            differ += len(alone ^ mine)
            total += len(alone)
    return differ, total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=SHAPES, default="tier")
    p.add_argument("--steps", type=int, default=2, help="timed steps a round and model")
    p.add_argument("--repeats", type=int, default=3, help="rounds, alternating the two models")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: the tiers' CPU autocast")
    p.add_argument("--offset-nms-trials", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    member, size, hw, objects = SHAPES[args.shape]
    nets = models(member)
    images, targets = batch(size, hw, objects, get_member(member, "maskrcnn").shape.num_classes, seed=1)
    with torch.no_grad():  # the heads' inputs: the backbone's maps of this batch, after the model's transform
        image_list, transformed = nets["torchvision"].transform(images, targets)
        features = nets["torchvision"].backbone(image_list.tensors)

    autocast = autocast_for(args.precision)

    def step(model: MaskRCNN) -> None:
        model.zero_grad(set_to_none=True)
        with autocast():
            loss = sum(model(images, targets).values())
        loss.backward()

    def heads(model: MaskRCNN) -> None:
        model.zero_grad(set_to_none=True)
        leaves = {k: v.detach().requires_grad_() for k, v in features.items()}
        with autocast():
            proposals, rpn_losses = model.rpn(image_list, leaves, transformed)
            _, losses = model.roi_heads(leaves, proposals, image_list.image_sizes, transformed)
            loss = sum([*rpn_losses.values(), *losses.values()])
        loss.backward()

    print(f"machine: {system.cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{args.precision}; "
          f"{member}'s shape, batch {size} at {hw[0]}x{hw[1]}, "
          f"{sum(len(t['boxes']) for t in targets)} boxes; load {os.getloadavg()[0]:.1f}")
    times: dict[tuple[str, str], list[float]] = {(part, name): [] for part in ("step", "heads") for name in nets}
    for r in range(args.repeats):
        for part, run in (("heads", heads), ("step", step)):
            for name, model in nets.items():
                times[part, name].append(cpu_timed(lambda: run(model), args.steps, warm_up=1 if r == 0 else 0))
            print(f"round {r + 1} {part}: " + ", ".join(f"{name} {times[part, name][-1]:.3f} s" for name in nets)
                  + f" CPU a step; load {os.getloadavg()[0]:.1f}")
    for part in ("heads", "step"):
        median = {name: statistics.median(times[part, name]) for name in nets}
        print(f"{part}, median of {args.repeats}: " + ", ".join(f"{name} {t:.3f} s" for name, t in median.items())
              + " CPU a step; torchvision / ours: " + ", ".join(
                  f"{name} {median['torchvision'] / median[name]:.2f}" for name in ("static", "cpu")))
    if args.offset_nms_trials:
        differ, total = offset_nms_mismatches(args.offset_nms_trials)
        print(f"one NMS over the batch by image offsets vs NMS per image: {differ} of {total:,} kept boxes differ")


if __name__ == "__main__":
    main()
