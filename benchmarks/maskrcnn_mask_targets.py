"""Mask R-CNN's mask targets at full size, old way against new, on one CPU thread: the loader's work
per image (full-resolution masks decoded by pycocotools, against outlines: data/outlines.py) and
the step's (the masks resized to the model's 800-1333 and pooled by roi_align per region, against
the outlines scaled and rasterised at 28x28 for the regions: mask_targets.py), for a micro-batch
of 8 COCO-sized images of made-up polygon objects (the workload's write_sample_data) and 40
positive regions an image (about what the full size samples, model.py's mask_rois).

  python benchmarks/maskrcnn_mask_targets.py [--images 8] [--regions 40] [--repeats 3]"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from torchvision.ops import box_iou

from trainclock.workloads.detection.data.layout import load_split
from trainclock.workloads.detection.data.outlines import outlines
from trainclock.workloads.detection.data.sample import write_official
from trainclock.workloads.detection.mask_targets import outline_targets
from trainclock.workloads.detection.maskrcnn_heads import project_masks
from trainclock.workloads.detection.transform import DetectionTransform


def cpu_seconds(work, repeats: int) -> float:
    """The least CPU time of `repeats` runs (the others had neighbours)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def positive_regions(boxes: torch.Tensor, count: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(regions (count, 4), their objects (count,)): jittered object boxes overlapping them by IoU >= 0.5."""
    rows = torch.randint(0, len(boxes), (20 * count,), generator=g)
    picked = boxes[rows]
    jitter = torch.randn(picked.shape, generator=g) * 0.1 * (picked[:, 2:] - picked[:, :2]).repeat(1, 2)
    regions = picked + jitter
    regions[:, 2:] = torch.maximum(regions[:, 2:], regions[:, :2] + 1)
    keep = box_iou(regions, boxes).gather(1, rows[:, None])[:, 0] >= 0.5
    return regions[keep][:count], rows[keep][:count]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=8)
    p.add_argument("--regions", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as folder:
        write_official(Path(folder), "coco", args.images, seed=0)
        records = load_split(Path(folder), "train", 1, keep_empty=False, masks=True).records[:args.images]
    transform = DetectionTransform(800, 1333, [0.0] * 3, [1.0] * 3, bucketed=True)
    loader_old = cpu_seconds(lambda: [torch.from_numpy(r.masks()) for r in records], args.repeats) / len(records)
    loader_new = cpu_seconds(lambda: [outlines(r.segmentations) for r in records], args.repeats) / len(records)
    images = [torch.zeros(3, r.height, r.width) for r in records]
    old = [{"boxes": torch.from_numpy(r.boxes), "labels": torch.from_numpy(r.labels),
            "masks": torch.from_numpy(r.masks())} for r in records]
    new = [{"boxes": torch.from_numpy(r.boxes), "labels": torch.from_numpy(r.labels), **outlines(r.segmentations)}
           for r in records]
    g = torch.Generator().manual_seed(0)
    _, resized = transform(images, [dict(t) for t in new])
    sampled = [positive_regions(t["boxes"], args.regions, g) for t in resized]
    regions, rows = [s[0] for s in sampled], [s[1] for s in sampled]
    positive = [torch.ones(len(r), dtype=torch.bool) for r in rows]

    image_only = cpu_seconds(lambda: transform(images, None), args.repeats)
    resize = {name: cpu_seconds(lambda t=t: transform(images, [dict(x) for x in t]), args.repeats) - image_only
              for name, t in (("old", old), ("new", new))}
    moved = {name: transform(images, [dict(x) for x in t])[1] for name, t in (("old", old), ("new", new))}
    make = {name: cpu_seconds(lambda name=name, f=f: f(moved[name], regions, rows, positive, 28), args.repeats)
            for name, f in (("old", project_masks), ("new", outline_targets))}
    objects = sum(len(r.boxes) for r in records)
    print(f"one CPU thread, load average {os.getloadavg()[0]:.1f}; {len(records)} images, {objects} objects, "
          f"{sum(len(r) for r in rows)} regions")
    print(f"loader, per image:  full masks {loader_old * 1e3:7.2f} ms   outlines {loader_new * 1e3:7.2f} ms")
    print(f"step, per batch:    masks resized {resize['old'] * 1e3:7.1f} ms + roi_align {make['old'] * 1e3:7.1f} ms   "
          f"outlines scaled {resize['new'] * 1e3:7.1f} ms + rasterised {make['new'] * 1e3:7.1f} ms")
    print("(resized: the transform's time with the targets less without them, so noisy at a few ms)")


if __name__ == "__main__":
    main()
