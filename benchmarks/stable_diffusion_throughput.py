"""Training throughput of a Stable Diffusion CPU tier, trainclock's step against the plain loop of
diffusers' own text-to-image example (examples/text_to_image/train_text_to_image.py), side by side
on the same latents, captions, noise and start weights; and the evaluation's time, separately.

  trainclock: the generic loop's train_step over the stable_diffusion job (micro-batches, gradient
              norm, AdamW with the warmup schedule), eager fp32 and bf16 autocast
  plain:      the example's loop body: encoder_hidden_states = text_encoder(ids)[0];
              noisy = scheduler.add_noise(latents, noise, t); target = scheduler.get_velocity(...);
              loss = mse(unet(noisy, t, encoder_hidden_states).sample, target); backward; step; zero_grad,
              with torch AdamW, no trainclock code, on a copy of the same UNet and text encoder

It prints images/s, MFU against the machine's matmul peak (the UNet's FLOPs; the encoders are
frozen) and the ratio trainclock / plain, then one evaluation's wall time (generation with DDIM and
guidance, FID features, CLIP cosines) and its share of a run of the tier's length.

  python benchmarks/stable_diffusion_throughput.py [--member sd-mini] [--steps 6]
"""

from __future__ import annotations

import copy

import torch

import harness
from trainclock.workloads.stable_diffusion.diffusion import training_scheduler
from timing import autocast_for


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
    args = harness.parser(__doc__, member="sd-mini", steps=6).parse_args()
    bench = harness.Bench.build(args.member)
    spec = bench.spec
    bench.header(args.steps)
    for i, precision in enumerate(("fp32", "bf16")):
        if i:
            bench = bench.rebuild()
        batches = bench.batches(args.steps + 1)
        plain = plain_step(bench.job, precision, batches)
        rates = harness.compare({"trainclock": bench.step(batches, precision), "plain": plain}, bench, args.steps,
                                label=f"{precision:4}")
        seconds, _ = harness.timed_evaluation(bench, precision)
        train_per_eval = spec.eval_every_samples / rates["trainclock"]
        print(f"  {precision:4} one evaluation ({spec.eval_captions} captions, {spec.ddim_steps} DDIM steps): "
              f"{seconds:.1f} s, {seconds / (seconds + train_per_eval):.0%} of a train+eval cycle")


if __name__ == "__main__":
    main()
