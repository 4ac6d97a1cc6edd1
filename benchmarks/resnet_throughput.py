"""Training throughput and MFU of a ResNet CPU tier: trainclock's step against the plain loop a
user would otherwise write, side by side in one run on the same images and start weights; and the
image loader alone, to say whether decoding or the model is the bottleneck.

  trainclock: the generic loop's train_step over the resnet job: images decoded and augmented in
              DataLoader workers by the StepLoader (seeded per sample), uint8 to the device,
              normalised there, channels_last, label smoothing 0.1, SGD with momentum
  plain:      torchvision's classification reference (references/classification/train.py,
              train_one_epoch): torchvision.datasets.ImageFolder with RandomResizedCrop +
              RandomHorizontalFlip + PILToTensor + ConvertImageDtype + Normalize, a shuffling
              DataLoader with the same number of workers, CrossEntropyLoss(label_smoothing=0.1),
              torch.optim.SGD, one forward/backward per batch; no trainclock code

Both loops run their own loader inside the timing (that is what a training step costs). Images/s,
MFU against the machine's matmul peak (the faster of bf16 and fp32, measured around each timing:
the CPU is shared and its speed drifts), the ratio trainclock / plain, then the loaders alone.

  python benchmarks/resnet_throughput.py [--member resnet-mini] [--steps 30] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import torch
import torchvision.transforms.v2 as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

from trainclock.distributed.context import single_process
from trainclock.train.step import train_step
from trainclock.workload.base import RunSettings
from trainclock.workloads.resnet import WORKLOAD
from trainclock.workloads.resnet.data.folder import scan
from trainclock.workloads.resnet.data.prepare import prepare
from trainclock.workloads.resnet.data.transforms import MEAN, STD
from trainclock.workloads.resnet.model import build_model
from trainclock.workloads.resnet.spec import get_member
from timing import CPU, autocast_for, timed, timed_at_peak


def interleaved(steps: dict, count: int, rounds: int = 3) -> dict[str, tuple[float, float]]:
    """Seconds per step of each loop, and the machine peak around it: the loops take turns in
    `rounds` rounds of count/rounds steps (a shared CPU's speed drifts over a run), best round kept."""
    for step in steps.values():
        for s in range(3):  # workers started, first batches decoded, allocator warm: untimed
            step(s)
    best: dict[str, tuple[float, float]] = {}
    per_round = max(1, count // rounds)
    for r in range(rounds):
        for name, step in steps.items():
            seconds, peak = timed_at_peak(step, per_round, 3 + r * per_round)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, peak)
    return best


def plain_loader(root, spec, workers: int) -> DataLoader:
    t = spec.transforms
    transform = T.Compose([T.RandomResizedCrop(t.crop, scale=t.scale, ratio=t.ratio, antialias=True),
                           T.RandomHorizontalFlip(), T.PILToTensor(), T.ToDtype(torch.float32, scale=True),
                           T.Normalize(MEAN, STD)])
    dataset = ImageFolder(str(root / "train"), transform=transform)
    return DataLoader(dataset, batch_size=spec.global_batch_size, shuffle=True, num_workers=workers,
                      drop_last=True, persistent_workers=workers > 0, **({"prefetch_factor": 4} if workers else {}))


def plain_step(job, spec, root, precision: str, workers: int):
    """torchvision's train_one_epoch, one batch per call."""
    model = build_model(spec.shape)
    model.load_state_dict({k.removeprefix("module."): v for k, v in job.model.state_dict().items()})
    criterion = torch.nn.CrossEntropyLoss(label_smoothing=spec.label_smoothing)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=spec.weight_decay)
    autocast = autocast_for(precision)
    batches = iter(plain_loader(root, spec, workers))
    model.train()

    def step(_s: int) -> None:
        images, labels = next(batches)
        with autocast():
            loss = criterion(model(images).float(), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def loader_alone(step_images, steps: int, images_per_step: int) -> float:
    for s in range(3):
        step_images(s)
    return images_per_step / timed(step_images, steps, 3)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--member", default="resnet-mini")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers for both loops")
    p.add_argument("--precisions", default="fp32,bf16")
    args = p.parse_args()
    spec = replace(get_member(args.member), loader_workers=args.workers)
    root = prepare(spec.train_images, spec.val_images, 28)
    gbs = spec.global_batch_size
    print(f"{args.member}: {spec.shape.describe()}; {gbs} images per step, {args.steps} timed steps, "
          f"{torch.get_num_threads()} threads, {args.workers} loader worker(s), load average {os.getloadavg()[0]:.1f}")
    ctx = single_process()
    for precision in args.precisions.split(","):
        for channels_last in (True, False):
            s = replace(spec, channels_last=channels_last)
            job = WORKLOAD.build_job(s, ctx, CPU, 1, RunSettings())
            plain = plain_step(job, s, root, precision, args.workers)  # copies the start weights first
            optimizer, autocast = job.optimizer.build(job.model), autocast_for(precision)

            def ours(step: int) -> None:
                batch = job.batch(step, slice(0, gbs))
                train_step(job, optimizer, batch, job.micro_batch_size, autocast, CPU, ctx)

            row = {}
            for name, (seconds, peak) in interleaved({"trainclock": ours, "plain": plain}, args.steps).items():
                row[name] = (gbs / seconds, job.flops_per_sample * gbs / seconds / peak)
                layout = "channels_last" if channels_last else "contiguous"
                print(f"  {precision:4} {layout:13} {name:10} {row[name][0]:7,.0f} images/s  MFU {row[name][1]:6.1%}  "
                      f"(peak {peak / 1e9:,.0f} GFLOP/s)")
            print(f"  {precision:4} ratio trainclock / plain: {row['trainclock'][0] / row['plain'][0]:.2f}")
    folder = scan(root)
    from trainclock.workloads.resnet.data.loader import StepLoader

    for workers in sorted({0, 1, args.workers}):
        ours_alone = StepLoader(folder.train, spec.transforms, 1, gbs, slice(0, gbs), workers)
        plain_alone = iter(plain_loader(root, spec, workers))
        print(f"  loader alone, {workers} worker(s): trainclock {loader_alone(lambda s: ours_alone(s, slice(0, gbs)), args.steps, gbs):7,.0f} "
              f"images/s, torchvision ImageFolder {loader_alone(lambda _s: next(plain_alone), args.steps, gbs):7,.0f} "
              "images/s")


if __name__ == "__main__":
    main()
