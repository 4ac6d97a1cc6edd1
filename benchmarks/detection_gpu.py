"""A few training steps of the full-size detection configs on one GPU (bf16 autocast), with the
trainclock model code (workloads/detection/model.py, loaded alone: the device machine lacks
pycocotools and the rest of trainclock's dependencies) on random 800x800 images with a few boxes,
and the images/s the published single-node entry implies per accelerator. Not a test.

  python benchmarks/detection_gpu.py [--steps 10] [--micro-batch 32]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))
_spec = importlib.util.spec_from_file_location("detection_model", SRC / "trainclock/workloads/detection/model.py")
model_code = sys.modules["detection_model"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(model_code)

# Dell PowerEdge XE9680 (8 x H100-SXM), MLPerf Training v3.1 closed: ssd 36.3 min, maskrcnn 19.9 min; the
# references' epochs to target at their batch (rules' RCPs: ssd about 4.3 epochs of 1,170,301 images,
# maskrcnn about 13 epochs of 117,266), so images per second per accelerator over the whole run
PUBLISHED = {"retinanet": 4.3 * 1_170_301 / (36.3 * 60) / 8, "maskrcnn": 13 * 117_266 / (19.9 * 60) / 8}
SHAPES = {
    "retinanet": model_code.DetectorShape("retinanet", "resnext50_32x4d", 264, 800, 800, fixed_size=True),
    "maskrcnn": model_code.DetectorShape("maskrcnn", "resnet50", 91, 800, 1333, fixed_size=False,
                                         detections_per_image=100),
}


def batch(arch: str, n: int, device: torch.device):
    g = torch.Generator().manual_seed(0)
    images, targets = [], []
    for _ in range(n):
        h, w = (800, 800) if arch == "retinanet" else (800, 1066)  # COCO's usual 4:3 at the 800 minimum side
        images.append(torch.rand(3, h, w, generator=g).to(device))
        xy = torch.rand(4, 2, generator=g) * torch.tensor([w - 200.0, h - 200.0])
        boxes = torch.cat([xy, xy + 50 + torch.rand(4, 2, generator=g) * 150], 1)
        t = {"boxes": boxes.to(device), "labels": torch.randint(1, 90, (4,), generator=g).to(device)}
        if arch == "maskrcnn":  # each box's outline (data/outlines.py's layout: objects, parts, edges, x1 y1 x2 y2)
            x1, y1, x2, y2 = boxes.unbind(1)
            corners = torch.stack([torch.stack([x1, y1], 1), torch.stack([x2, y1], 1),
                                   torch.stack([x2, y2], 1), torch.stack([x1, y2], 1)], 1)  # (4 objects, 4 corners, xy)
            edges = torch.cat([corners, corners.roll(-1, 1)], 2)  # corner c to corner c + 1
            t["mask_edges"] = edges.unsqueeze(1).to(device)
        targets.append(t)
    return images, targets


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--micro-batch", type=int, default=16)
    args = p.parse_args()
    device = torch.device("cuda")
    for arch, shape in SHAPES.items():
        model = model_code.build_model(shape).to(device).train()
        params = [q for q in model.parameters() if q.requires_grad]
        optimizer = torch.optim.Adam(params, 1e-4) if arch == "retinanet" else torch.optim.SGD(params, 0.02, momentum=0.9)
        images, targets = batch(arch, args.micro_batch, device)

        def step() -> None:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = sum(model(images, targets).values())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        rate = args.micro_batch * args.steps / (time.perf_counter() - start)
        print(f"{arch}: {sum(q.numel() for q in model.parameters()) / 1e6:.1f}M parameters, micro-batch "
              f"{args.micro_batch}, bf16 autocast: {rate:.1f} images/s on {torch.cuda.get_device_name()} "
              f"(peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB); the published 8 x H100 entry "
              f"implies {PUBLISHED[arch]:.0f} images/s per accelerator over its whole run")
        del model, optimizer
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    main()
