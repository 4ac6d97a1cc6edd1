"""Training target and sampler, as the reference (ldm, parameterization "v") has them: the DDPM
scaled-linear schedule (betas from 0.00085 to 0.012 over 1,000 steps, linear in sqrt), the
v-prediction target v = sqrt(a) * noise - sqrt(1 - a) * x0, and for evaluation DDIM (eta 0) with
classifier-free guidance against the empty caption's conditioning."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from diffusers import DDPMScheduler

# diffusers is imported where a scheduler is made: the registry imports this module for every command
SCHEDULE = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                prediction_type="v_prediction")


def training_scheduler() -> DDPMScheduler:
    from diffusers import DDPMScheduler

    return DDPMScheduler(**SCHEDULE)


def v_loss(model, scheduler: DDPMScheduler, latents: torch.Tensor, noise: torch.Tensor, timesteps: torch.Tensor,
           ids: torch.Tensor) -> torch.Tensor:
    noisy = scheduler.add_noise(latents, noise, timesteps)
    target = scheduler.get_velocity(latents, noise, timesteps)
    prediction = model(noisy, timesteps, ids)
    return torch.nn.functional.mse_loss(prediction.float(), target.float())


@torch.no_grad()
def sample(model, ids: torch.Tensor, empty_ids: torch.Tensor, noise: torch.Tensor, steps: int, guidance: float,
           autocast) -> torch.Tensor:
    """Latents from noise by DDIM in `steps` steps, guided: uncond + guidance * (cond - uncond)."""
    from diffusers import DDIMScheduler

    scheduler = DDIMScheduler(**SCHEDULE, clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    scheduler.set_timesteps(steps)
    latents = noise * scheduler.init_noise_sigma
    both = torch.cat([empty_ids.expand(len(ids), -1), ids])
    for t in scheduler.timesteps:
        with autocast():
            out = model(torch.cat([latents, latents]), t.expand(2 * len(ids)).to(latents.device), both).float()
        uncond, cond = out.chunk(2)
        latents = scheduler.step(uncond + guidance * (cond - uncond), t, latents).prev_sample
    return latents
