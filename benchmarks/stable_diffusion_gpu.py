"""A few training steps of sd-laion400m's UNet (SD v2, 865.9M, random weights: the checkpoint is
not needed for speed) in bf16 autocast on one GPU, with the text tower's penultimate-layer
conditioning at 77 tokens: images/s against the per-GPU rate implied by Dell's published 8 x H100
entry (shared/mlperf-suite, v3.1: 1,000 steps x 512 images in 548.7 s between step 0 and 1,000
= 116.6 images/s per GPU). Loads model.py by path so only torch, diffusers and transformers are needed.

  python benchmarks/stable_diffusion_gpu.py [--batch 32] [--steps 10]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

DELL_PER_GPU = 512_000 / 548.7 / 8
MODEL = Path(__file__).resolve().parents[1] / "src/trainclock/workloads/stable_diffusion/model.py"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args()
    spec = importlib.util.spec_from_file_location("sd_model", MODEL)
    model = importlib.util.module_from_spec(spec)
    sys.modules["sd_model"] = model  # dataclasses look their module up
    spec.loader.exec_module(model)
    from diffusers import DDPMScheduler
    from transformers import CLIPTextModel

    device = torch.device("cuda")
    unet = model.SD2_UNET.build().to(device)
    text = CLIPTextModel(model.sd2_text_config()).to(device).eval().requires_grad_(False)
    print(f"UNet {sum(p.numel() for p in unet.parameters()):,} parameters; {torch.cuda.get_device_name()}")
    scheduler = DDPMScheduler(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                              beta_schedule="scaled_linear", prediction_type="v_prediction")
    scheduler.alphas_cumprod = scheduler.alphas_cumprod.to(device)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=6.4e-5, weight_decay=0.01, fused=True)
    b = args.batch
    latents = torch.randn(b, 4, 64, 64, device=device)
    ids = torch.randint(0, 49408, (b, 77), device=device)

    def step() -> float:
        noise = torch.randn_like(latents)
        t = torch.randint(0, 1000, (b,), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                context = text(input_ids=ids).last_hidden_state
            pred = unet(scheduler.add_noise(latents, noise, t), t, encoder_hidden_states=context).sample
            loss = torch.nn.functional.mse_loss(pred.float(), scheduler.get_velocity(latents, noise, t).float())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    rate = b * args.steps / (time.perf_counter() - start)
    print(f"batch {b}: {rate:.1f} images/s (loss {loss:.3f}); Dell 8xH100 per GPU {DELL_PER_GPU:.1f} images/s; "
          f"ratio {rate / DELL_PER_GPU:.2f}; peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
