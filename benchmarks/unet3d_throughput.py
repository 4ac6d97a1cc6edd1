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

import argparse
import copy
import os

import torch

from trainclock.distributed.context import single_process
from trainclock.train.step import train_step
from trainclock.workload.base import RunSettings
from trainclock.workloads.unet3d import WORKLOAD
from trainclock.workloads.unet3d.loss import dice_ce_loss
from trainclock.workloads.unet3d.spec import get_member
from timing import CPU, autocast_for, timed_at_peak


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
    p = argparse.ArgumentParser()
    p.add_argument("--member", default="unet3d-mini")
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    spec = get_member(args.member)
    voxels = spec.patch ** 3
    print(f"{args.member}: {spec.global_batch_size} patches of {spec.patch}^3 per step, {args.steps} timed steps, "
          f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    ctx = single_process()
    for precision in ("fp32", "bf16"):
        job = WORKLOAD.build_job(spec, ctx, CPU, 1, RunSettings())  # the tier's generated volumes, cached
        batches = [job.batch(s, slice(0, job.global_batch_size)) for s in range(args.steps + 1)]  # the loop's own batches, for both loops
        plain = plain_step(job, precision, batches)
        optimizer, autocast = job.optimizer.build(job.model), autocast_for(precision)

        def ours(s: int) -> None:
            train_step(job, optimizer, batches[s], job.micro_batch_size, autocast, CPU, ctx)

        row = {}
        for name, step in (("trainclock", ours), ("plain", plain)):
            seconds, peak = timed_at_peak(step, args.steps, first=1, warm_up=1)
            samples_per_s = spec.global_batch_size / seconds
            row[name] = (samples_per_s, job.flops_per_sample * samples_per_s / peak)
            print(f"  {precision:4} {name:10} {samples_per_s:7.2f} patches/s  {samples_per_s * voxels / 1e6:6.2f} Mvoxel/s  "
                  f"MFU {row[name][1]:6.1%}  (peak {peak / 1e9:,.0f} GFLOP/s)")
        print(f"  {precision:4} ratio trainclock / plain: {row['trainclock'][0] / row['plain'][0]:.2f}")


if __name__ == "__main__":
    main()
