"""Training throughput of a Stable Diffusion CPU tier, trainclock's step against the plain loop of
diffusers' own text-to-image example (examples/text_to_image/train_text_to_image.py), side by side
on the same latents, captions, noise and start weights; and the evaluation's time, separately.

  trainclock: the generic loop's train_step over the stable_diffusion job (micro-batches, gradient
              norm, AdamW with the warmup schedule), eager fp32 and bf16 autocast
  plain:      the example's loop body: encoder_hidden_states = text_encoder(ids)[0];
              noisy = scheduler.add_noise(latents, noise, t); target = scheduler.get_velocity(...);
              loss = mse(unet(noisy, t, encoder_hidden_states).sample, target); backward; step; zero_grad,
              with torch AdamW, no trainclock code, on a copy of the same UNet and text encoder

It prints images/s and the ratio trainclock / plain, then one evaluation's wall time (generation
with DDIM and guidance, FID features, CLIP cosines) and its share of a run of the tier's length.

  python benchmarks/stable_diffusion_throughput.py [--member sd-mini] [--steps 6]
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import torch

from trainclock.distributed.context import single_process
from trainclock.train.step import train_step
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion import WORKLOAD
from trainclock.workloads.stable_diffusion.diffusion import training_scheduler
from trainclock.workloads.stable_diffusion.spec import get_member
from timing import CPU, autocast_for, timed


def plain_step(job, precision: str, batches):
    model = copy.deepcopy(job.model)
    unet, text_encoder = model.unet, model.text_encoder
    optimizer = torch.optim.AdamW(unet.parameters(), lr=job.optimizer.lr_at(0), weight_decay=0.01)
    scheduler = training_scheduler()
    autocast = autocast_for(precision)

    def step(s: int) -> None:
        b = batches[s]
        with autocast():
            with torch.no_grad():
                context = text_encoder(b["ids"])[0]
            noisy = scheduler.add_noise(b["latents"], b["noise"], b["timesteps"])
            target = scheduler.get_velocity(b["latents"], b["noise"], b["timesteps"])
            prediction = unet(noisy, b["timesteps"], context).sample
            loss = torch.nn.functional.mse_loss(prediction.float(), target.float())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--member", default="sd-mini")
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    spec = get_member(args.member)
    print(f"{args.member}: {spec.global_batch_size} images per step, {args.steps} timed steps, "
          f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    ctx = single_process()
    for precision in ("fp32", "bf16"):
        job = WORKLOAD.build_job(spec, ctx, CPU, 1, RunSettings())
        batches = [job.batch(s, slice(0, job.global_batch_size)) for s in range(args.steps + 1)]
        plain = plain_step(job, precision, batches)
        optimizer, autocast = job.optimizer.build(job.model), autocast_for(precision)

        def ours(s: int) -> None:
            train_step(job, optimizer, batches[s], job.micro_batch_size, autocast, CPU, ctx)

        rates = {}
        for name, step in (("trainclock", ours), ("plain", plain)):
            rates[name] = spec.global_batch_size / timed(step, args.steps, first=1, warm_up=1)
            print(f"  {precision:4} {name:10} {rates[name]:7.2f} images/s")
        print(f"  {precision:4} ratio trainclock / plain: {rates['trainclock'] / rates['plain']:.2f}")
        start = time.perf_counter()
        job.evaluate(job.model, autocast, (0, 1))
        seconds = time.perf_counter() - start
        train_per_eval = spec.eval_every_samples / rates["trainclock"]
        print(f"  {precision:4} one evaluation ({spec.eval_captions} captions, {spec.ddim_steps} DDIM steps): "
              f"{seconds:.1f} s, {seconds / (seconds + train_per_eval):.0%} of a train+eval cycle")


if __name__ == "__main__":
    main()
