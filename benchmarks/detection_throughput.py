"""Training throughput of a detection CPU tier (retinanet-* or maskrcnn-*), trainclock's step
against the plain loop a user would otherwise write (torchvision's references/detection
train_one_epoch body), side by side on the same images and start weights, and the share of a
run's time its evaluations take (one evaluation: detections over the whole validation set, then
COCOeval, against the training time between two evaluations).

  trainclock: the generic loop's train_step over the detection job (micro-batches, gradient
              norm, the tier's optimizer and schedule), eager fp32
  plain:      loss_dict = model(images, targets); losses = sum(loss_dict.values());
              optimizer.zero_grad(); losses.backward(); optimizer.step(), with the same torch
              optimizer, no trainclock code, on a copy of the same network and weights

  python benchmarks/detection_throughput.py [--member retinanet-mini] [--steps 8]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import time

import torch

from trainclock.distributed.context import single_process
from trainclock.train.step import train_step
from trainclock.workload import registry
from trainclock.workload.base import RunSettings
from timing import CPU, timed_at_peak


def plain_step(job, batches):
    model = copy.deepcopy(job.model)  # the same start weights, before trainclock trains them
    optimizer = job.optimizer.build(model)  # the same torch optimizer class and settings

    def step(s: int) -> None:
        loss_dict = model(batches[s]["images"], batches[s]["targets"])
        losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--member", default="retinanet-mini")
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    workload, name = registry.find(args.member)
    ctx = single_process()
    spec = workload.resolve(name, RunSettings(), ctx.layout, CPU)
    print(f"{name}: {spec.global_batch_size} images of {spec.shape.min_size} px per step, {args.steps} timed steps, "
          f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    job = workload.build_job(spec, ctx, CPU, 1, RunSettings())  # the tier's mosaics, cached
    batches = [job.batch(s, slice(0, job.global_batch_size)) for s in range(args.steps + 1)]  # the loop's own batches, for both loops
    plain = plain_step(job, batches)
    optimizer = job.optimizer.build(job.model)

    def ours(s: int) -> None:
        train_step(job, optimizer, batches[s], job.micro_batch_size, contextlib.nullcontext, CPU, ctx)

    rate = {}
    for label, step in (("trainclock", ours), ("plain", plain)):
        seconds, peak = timed_at_peak(step, args.steps, first=1, warm_up=1)
        rate[label] = spec.global_batch_size / seconds
        print(f"  {label:10} {rate[label]:7.1f} images/s  MFU {job.flops_per_sample * rate[label] / peak:6.2%}  "
              f"(peak {peak / 1e9:,.0f} GFLOP/s)")
    print(f"  ratio trainclock / plain: {rate['trainclock'] / rate['plain']:.2f}")
    start = time.perf_counter()
    metrics = job.score(job.evaluate(job.model, contextlib.nullcontext, (0, 1)))
    evaluation = time.perf_counter() - start
    between = spec.eval_every_samples / rate["trainclock"]
    print(f"  one evaluation ({job.eval_samples} images + COCOeval, {metrics}): {evaluation:.1f} s against "
          f"{between:.1f} s of training between evaluations: {evaluation / (evaluation + between):.0%} of the run")


if __name__ == "__main__":
    main()
