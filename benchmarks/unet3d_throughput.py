"""Training throughput and MFU of a 3D U-Net CPU tier, trainclock's step against the plain loop a
user would otherwise write (the MLCommons reference's runtime/training.py), side by side on the
same patches and start weights.

  trainclock: the generic loop's train_step over the unet3d job (micro-batches, gradient norm,
              Nesterov SGD with the warmup schedule), eager fp32 and bf16 autocast
  plain:      the reference's loop body: output = model(image); loss = DiceCE(output, label);
              loss.backward(); optimizer.step(); optimizer.zero_grad(), with torch SGD (Nesterov),
              no trainclock code, on a copy of the same network and weights

It prints patches/s, voxels/s, MFU against the machine's matmul peak (the faster of bf16 and
fp32, measured around each timing: the CPU is shared and its speed drifts) and the ratio
trainclock / plain. The FLOPs are the same for both (the convolutions of one patch, x3).

  python benchmarks/unet3d_throughput.py [--member unet3d-mini] [--steps 8]
"""

from __future__ import annotations

import copy

import torch

import harness
from trainclock.workloads.unet3d.loss import dice_ce_loss
from timing import autocast_for


def plain_step(job, precision: str, batches):
    model = copy.deepcopy(job.model)  # the same start weights, before trainclock trains them
    optimizer = torch.optim.SGD(model.parameters(), lr=job.optimizer.lr_at(0), momentum=0.9, nesterov=True)
    autocast = autocast_for(precision)

    def step(s: int) -> None:
        image, label = batches[s]["image"], batches[s]["label"]
        with autocast():
            output = model(image)
            loss = dice_ce_loss(output, label)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def main() -> None:
    args = harness.parser(__doc__, member="unet3d-mini", steps=8).parse_args()
    bench = harness.Bench.build(args.member)  # the tier's generated volumes, cached
    spec = bench.spec
    gbs, voxels = spec.global_batch_size, spec.patch ** 3
    bench.header(args.steps, f"{gbs} patches of {spec.patch}^3 per step")
    for i, precision in enumerate(("fp32", "bf16")):
        if i:
            bench = bench.rebuild()
        batches = bench.batches(args.steps + 1)  # the loop's own batches, for both loops
        plain = plain_step(bench.job, precision, batches)
        harness.compare({"trainclock": bench.step(batches, precision), "plain": plain}, bench, args.steps,
                        label=f"{precision:4}", unit="patches",
                        extras=lambda seconds: f"{gbs * voxels / seconds / 1e6:6.2f} Mvoxel/s")


if __name__ == "__main__":
    main()
