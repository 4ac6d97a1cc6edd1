"""The full config is MLPerf's: the SD v2 UNet's parameter count (on the meta device), the text
tower's shape, the schedule, the optimizer's fixed values and keys, the cadence and the target."""

from __future__ import annotations

import pytest

from trainclock.workloads.stable_diffusion.optim import AdamWLinearWarmup
from trainclock.workloads.stable_diffusion.metric import CLIP, FID
from trainclock.workloads.stable_diffusion.spec import get_member


def test_full_config_is_the_reference():
    spec = get_member("sd-laion400m")
    assert spec.parameter_count() == 865_910_724  # SD v2's UNet, 865.9M
    assert spec.unet.cross_attention_dim == 1024 and spec.unet.block_out_channels == (320, 640, 1280, 1280)
    assert spec.learning_rate == pytest.approx(1.25e-7 * 512) and spec.warmup_steps == 1000
    assert (spec.eval_every_samples, spec.eval_captions, spec.ddim_steps, spec.guidance) == (512_000, 30_000, 50, 8.0)
    assert (spec.targets[FID], spec.targets[CLIP], spec.latent_scale) == (90.0, 0.15, 0.18215)
    assert spec.with_batch(1024).learning_rate == pytest.approx(1.28e-4)


def test_optimizer_warms_up_linearly_from_f_start_and_logs_the_rules_keys():
    opt = AdamWLinearWarmup(6.4e-5, 1000)
    assert opt.lr_at(0) == pytest.approx(6.4e-5 * 1e-6) and opt.lr_at(500) == pytest.approx(6.4e-5 * (0.5 + 0.5e-6))
    assert opt.lr_at(1000) == opt.lr_at(10**6) == 6.4e-5
    keys = opt.log_keys()
    assert (keys["opt_name"], keys["opt_adamw_beta_1"], keys["opt_adamw_beta_2"]) == ("adamw", 0.9, 0.999)
    assert (keys["opt_adamw_epsilon"], keys["opt_adamw_weight_decay"]) == (1e-8, 0.01)
    assert keys["opt_learning_rate_warmup_steps"] == 1000
    assert "opt_learning_rate_decay_steps" not in keys  # the reference holds its rate after the warmup


def test_a_tiers_step_decays_multiply_the_rate_and_are_logged():
    opt = AdamWLinearWarmup(1e-3, 10, decay_steps=(40, 50))
    assert [opt.lr_at(s) for s in (39, 40, 49, 50, 99)] == pytest.approx([1e-3, 1e-4, 1e-4, 1e-5, 1e-5])
    keys = opt.log_keys()
    assert keys["opt_learning_rate_decay_steps"] == [40, 50] and keys["opt_learning_rate_decay_factor"] == 0.1


def test_v_target_and_ddim_agree_with_diffusers():
    import torch

    from trainclock.workloads.stable_diffusion import diffusion

    s = diffusion.training_scheduler()
    x, noise, t = torch.randn(2, 4, 8, 8), torch.randn(2, 4, 8, 8), torch.tensor([10, 900])
    a = s.alphas_cumprod[t].view(-1, 1, 1, 1)
    assert torch.allclose(s.get_velocity(x, noise, t), a.sqrt() * noise - (1 - a).sqrt() * x, atol=1e-5)
    assert s.betas[0] == pytest.approx(0.00085) and s.betas[-1] == pytest.approx(0.012, rel=1e-4)


def test_a_cpu_tier_attends_explicitly_and_computes_what_sdpa_does():
    import torch
    from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0

    from trainclock.distributed.context import single_process
    from trainclock.workload.base import RunSettings
    from trainclock.workloads.stable_diffusion.workload import build_model

    spec = get_member("sd-tiny")
    torch.manual_seed(0)
    model = build_model(spec, single_process(), torch.device("cpu"), RunSettings())
    processors = set(map(type, model.unet.attn_processors.values()))
    assert processors == {AttnProcessor}  # the CPU flash kernel's backward is slow at 64 tokens

    # the same weights through torch's SDPA give the same prediction and gradients
    latents = torch.randn(2, spec.unet.channels, spec.unet.sample_size, spec.unet.sample_size)
    timesteps, ids = torch.tensor([5, 700]), torch.randint(3, 20, (2, spec.text_length))
    explicit = model(latents, timesteps, ids)
    explicit.square().sum().backward()
    grads = [p.grad.clone() for p in model.unet.parameters()]
    model.zero_grad()
    model.unet.set_attn_processor(AttnProcessor2_0())
    fused = model(latents, timesteps, ids)
    fused.square().sum().backward()
    assert torch.allclose(explicit, fused, atol=1e-5)
    assert all(torch.allclose(a, p.grad, atol=1e-4) for a, p in zip(grads, model.unet.parameters()))

    full = build_model(get_member("sd-laion400m"), single_process(), torch.device("meta"), RunSettings())
    assert set(map(type, full.unet.attn_processors.values())) == {AttnProcessor2_0}  # 4,096 tokens: SDPA
