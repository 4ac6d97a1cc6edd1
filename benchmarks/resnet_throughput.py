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

from dataclasses import replace

import torch
import torchvision.transforms.v2 as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

import harness
from trainclock.workloads.resnet.data.folder import scan
from trainclock.workloads.resnet.data.loader import StepLoader
from trainclock.workloads.resnet.data.prepare import prepare
from trainclock.workloads.resnet.data.transforms import MEAN, STD
from trainclock.workloads.resnet.model import build_model
from timing import autocast_for, timed


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
    p = harness.parser(__doc__, member="resnet-mini", steps=30)
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers for both loops")
    p.add_argument("--precisions", default="fp32,bf16")
    args = p.parse_args()
    modes = [(precision, channels_last) for precision in args.precisions.split(",") for channels_last in (True, False)]
    for i, (precision, channels_last) in enumerate(modes):
        bench = harness.Bench.build(args.member, spec_of=lambda s, cl=channels_last: replace(
            s, loader_workers=args.workers, channels_last=cl))
        spec = bench.spec
        root = prepare(spec.train_images, spec.val_images, 28)  # the tier's JPEG folders, cached
        if i == 0:
            bench.header(args.steps, f"{spec.shape.describe()}; {spec.global_batch_size} images per step",
                         workers=f"{args.workers} loader worker(s)")
        plain = plain_step(bench.job, spec, root, precision, args.workers)  # copies the start weights first
        layout = "channels_last" if channels_last else "contiguous"
        # both loops read their batches inside the timing (bench.step(None)): the loader is part of a step
        harness.compare({"trainclock": bench.step(None, precision), "plain": plain}, bench, args.steps,
                        label=f"{precision:4} {layout:13}", timing=harness.interleaved(args.steps))
    gbs, folder = spec.global_batch_size, scan(root)
    for workers in sorted({0, 1, args.workers}):
        ours_alone = StepLoader(folder.train, spec.transforms, 1, gbs, slice(0, gbs), workers)
        plain_alone = iter(plain_loader(root, spec, workers))
        print(f"  loader alone, {workers} worker(s): trainclock {loader_alone(lambda s: ours_alone(s, slice(0, gbs)), args.steps, gbs):7,.0f} "
              f"images/s, torchvision ImageFolder {loader_alone(lambda _s: next(plain_alone), args.steps, gbs):7,.0f} "
              "images/s")


if __name__ == "__main__":
    main()
