"""Stable Diffusion as a workload: its members, the checks a run must pass, and the job the generic
loop trains (latents and captions, the UNet beside its frozen text encoder, the v-prediction loss,
DDIM sampling scored by FID and CLIP score, AdamW with warmup, stable_diffusion's log keys)."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism, build_parallelized
from trainclock.errors import UsageError
from trainclock.optim.ema import averaged
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.evaluation import shard_rows
from trainclock.workload.spec_base import division
from trainclock.workloads.stable_diffusion import diffusion, metric
from trainclock.workloads.stable_diffusion.cost import cost_model, unet_forward_flops
from trainclock.workloads.stable_diffusion.data import captioned
from trainclock.workloads.stable_diffusion.data.batches import SampleBatches
from trainclock.workloads.stable_diffusion.data.sets import EvalSet, TrainSet
from trainclock.workloads.stable_diffusion.model import Conditioned, SpaceToDepth, sd2_text_config, tiny_text_config
from trainclock.workloads.stable_diffusion.optim import AdamWLinearWarmup
from trainclock.workloads.stable_diffusion.spec import MEMBERS, MLPERF_ROUND, SDSpec, get_member
from trainclock.workloads.stable_diffusion.cost import run_progress

EVAL_BATCH = 16  # captions generated per sampler call
EVAL_NOISE_SEED = 1234  # the starting noise of caption i is fixed: every run and rank draws the same
PARALLELISM = ModelParallelism(gpu_memory_format=torch.channels_last)
RULES_DATASET = "laion"


class StableDiffusionWorkload(BenchmarkWorkload):
    key = "stable_diffusion"
    full_size_flags = "--data LAION_DIR --checkpoint SD2_DIR --evaluators EVAL_DIR"
    mlperf_round = MLPERF_ROUND
    title = "Stable Diffusion"
    specs = MEMBERS
    unit = batch_units = "images"
    needs_data = ("sd-laion400m trains on the LAION-400M moments: pass --data FOLDER (the webdataset .tar shards "
                  "and val2014_30k.tsv) and --checkpoint DIR; nothing is downloaded")

    def describe(self, spec: SDSpec) -> str:
        return f"UNet {'-'.join(map(str, spec.unet.block_out_channels))}, {spec.unet.sample_size}^2 latents"

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--checkpoint", metavar="DIR", help="sd-laion400m: the SD2 checkpoint folder "
                           "(vae/, text_encoder/, tokenizer/ in diffusers' layout; default: --data's checkpoint/); "
                           "never downloaded")
        group.add_argument("--evaluators", metavar="DIR", help="sd-laion400m: fid_features.pt and clip.pt "
                           "(TorchScript Inception pool3 and ViT-H/14), and val2014_30k_stats.npz (default: "
                           "--data's evaluators/)")

    def check_run(self, spec: SDSpec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        if spec.dataset == "captioned" and settings.data is not None:
            raise UsageError(f"{spec.name} makes its own data (captioned Fashion-MNIST items, generated when its data "
                             "is prepared); drop --data")
        if spec.ema_decay is not None and (layout.fsdp or layout.tp > 1 or layout.pp > 1):
            raise UsageError(f"{spec.name} averages its weights, which needs whole (replicated) weights on every "
                             "process; run it data parallel without --fsdp/--tp/--pp")
        super().check_run(spec, settings, layout, device)

    def build_job(self, spec: SDSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        if spec.dataset != "captioned":
            from trainclock.workloads.stable_diffusion.official import build_official

            # on meta (a dry run, the host pipeline's timing) no weights are read: the encoder is built there
            train, evals, text_encoder = build_official(spec, settings, weights=device.type != "meta")
        else:
            train, evals, text_encoder = ctx.main_first(lambda: load_tier(spec))
        torch.manual_seed(seed)
        model = build_model(spec, ctx, device, settings, text_encoder)
        return sd_job(spec, model, train, evals, seed, device)

    def build_model(self, spec: SDSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        return build_model(spec, ctx, device, settings)

    def optimizer(self, spec: SDSpec) -> AdamWLinearWarmup:
        return optimizer(spec)

    def sample_loss(self, spec: SDSpec, model: torch.nn.Module, rows: int, device: torch.device) -> torch.Tensor:
        """The v-prediction loss of `rows` latents as a step draws them (fp32 (rows, 4, 64, 64) at
        full size, from the VAE moments), their noise, timesteps in [0, 1000) and caption ids
        padded to 77 (SD2's CLIP tokenizer), through the frozen text encoder and the UNet."""
        scheduler = diffusion.training_scheduler()
        shape = (rows, spec.unet.channels, spec.unet.sample_size, spec.unet.sample_size)
        latents = torch.randn(shape, device=device)
        noise = torch.randn(shape, device=device)
        timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (rows,), device=device)
        ids = torch.randint(0, text_config(spec).vocab_size, (rows, spec.text_length), device=device)
        return diffusion.v_loss(model, scheduler, latents, noise, timesteps, ids)

    def fetch_data(self) -> str | None:
        return None  # the tiers generate their data from Fashion-MNIST in prepare

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if spec.dataset != "captioned":
            raise UsageError("sd-laion400m reads its shards where they are: pass them to `trainclock run` with --data")
        if data is not None:
            raise UsageError(f"{spec.name} makes its own data (captioned Fashion-MNIST items); drop --data")
        from trainclock.workloads.stable_diffusion.data.prepare import prepare_tier

        folder = prepare_tier(spec.name, spec.train_images, spec.eval_captions, spec.text_length, spec.text_width, force)
        return f"{spec.train_images} captioned images, {spec.eval_captions} evaluation captions and the tiny evaluators in {folder}"

    def cost(self, member: str):
        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        """Made-up LAION-400M moments of the member's latent shape in the reference's shards, one COCO
        caption and a CLIP tokenizer in checkpoint/tokenizer/ (data/sample.py): what a job on the meta
        device reads. No weights: a run on a real device still needs SD2's and the evaluators'."""
        spec = get_member(member)
        if spec.dataset != "laion":
            raise UsageError(f"{member} reads no --data: its captioned images are generated when its data is "
                             "prepared (`trainclock data prepare`)")
        from trainclock.workloads.stable_diffusion.data.sample import write_laion

        return str(write_laion(Path(folder), samples, seed, spec.unet.channels, spec.unet.sample_size))


def text_config(spec: SDSpec):
    """The frozen text encoder's shape: SD2's OpenCLIP text tower, or the tier's tiny CLIP tower
    over its closed vocabulary (the words and CLIP's 4 special ids)."""
    if spec.dataset == "laion":
        return sd2_text_config()
    return tiny_text_config(len(captioned.WORDS) + 4, spec.text_width, spec.text_length)


# On a CPU, small latents attend through diffusers' explicit attention (baddbmm, softmax, bmm) rather
# than torch's SDPA: its CPU flash kernel's backward takes 3.4 ms per call on the tiers' 64-token,
# 2-head attention (23% of a step), and sd-tiny trains 1.2-1.3x more images/s without it (bf16, 2
# threads). At SD2's 64 x 64 latents the explicit form would hold 4,096 x 4,096 scores per head.
EXPLICIT_ATTENTION_MAX_SIZE = 32


def build_model(spec: SDSpec, ctx: ParallelContext, device: torch.device, settings: RunSettings,
                text_encoder: torch.nn.Module | None = None) -> torch.nn.Module:
    """The UNet (drawn from the current random state) beside the frozen text encoder, as this rank
    trains them: `text_encoder` is the one the data brings (SD2's from --checkpoint, the tier's
    trained tower); without it one of the member's shape stands in, drawn apart from the random
    state, so the UNet and every later draw are those of a build with the data's. Built whole
    (865.9M UNet parameters, under parallelize's limit), except for a meta device (a dry run),
    where both are built on meta and nothing is read. The text encoder's weights are frozen
    (requires_grad False: no gradients, left out of the optimizer); the VAE is no part of it
    (the shards hold its moments; only evaluation decodes)."""
    from transformers import CLIPTextModel

    def make() -> Conditioned:
        unet = spec.unet.build()
        if device.type == "cpu" and spec.unet.sample_size <= EXPLICIT_ATTENTION_MAX_SIZE:
            from diffusers.models.attention_processor import AttnProcessor

            unet.set_attn_processor(AttnProcessor())
        if text_encoder is not None:
            return Conditioned(unet, text_encoder, spec.ema_decay)
        with torch.random.fork_rng(devices=[]):
            return Conditioned(unet, CLIPTextModel(text_config(spec)), spec.ema_decay)

    return build_parallelized(make, device, ctx, PARALLELISM, compile=settings.compile,
                              activation_checkpointing=settings.activation_checkpointing)


def optimizer(spec: SDSpec) -> AdamWLinearWarmup:
    return AdamWLinearWarmup(spec.learning_rate, spec.warmup_steps, spec.warmup_start, decay_steps=spec.decay_steps)


def load_tier(spec: SDSpec) -> tuple[TrainSet, EvalSet, torch.nn.Module]:
    from trainclock.workloads.stable_diffusion.data.prepare import load_tier as load

    tier = load(spec.name, spec.train_images, spec.eval_captions, spec.text_length, spec.text_width)
    clip = tier.clip

    def cosine(images: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return (clip.embed_images(images) * clip.embed_text(ids)).sum(-1)

    evals = EvalSet(tier.eval_ids, tier.empty_ids, SpaceToDepth().decode, tier.features, cosine, tier.reference)
    text_encoder = type(clip.text)(clip.text.config)
    text_encoder.load_state_dict(clip.text.state_dict())
    return TrainSet(tier.latents, tier.ids), evals, text_encoder


def sd_job(spec: SDSpec, model: torch.nn.Module, train: TrainSet, evals: EvalSet, seed: int,
           device: torch.device) -> TrainJob:
    """The job around a built model and loaded data; tests build one directly to write logs."""
    scheduler = diffusion.training_scheduler()
    n = len(train.ids)
    # a rank draws and reads only its own rows, from (seed, step, rows): resume and any rank count see the same
    batches = SampleBatches(train, spec.global_batch_size, seed, spec.latent_scale, spec.drop_caption,
                            evals.empty_ids[0], scheduler.config.num_train_timesteps)

    def loss(m: torch.nn.Module, b: dict) -> torch.Tensor:
        return diffusion.v_loss(m, scheduler, b["latents"], b["noise"], b["timesteps"], b["ids"])

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        inner = getattr(m, "module", m)
        with averaged(inner):  # a tier with a weight average is scored on it, as the reference's ema_scope
            return generate_and_score(inner, spec, evals, shard, autocast, device)

    return member_job(
        spec,
        division=division(spec, spec.dataset, RULES_DATASET),
        model=model,
        batch=batches.batch,
        loss=loss,
        evaluate=evaluate,
        score=lambda stats: metric.score(stats, evals.reference),
        progress=run_progress(spec),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=3 * unet_forward_flops(spec),  # the UNet forward + backward: the encoders are frozen
        optimizer=optimizer(spec),
        eval_schedule=EvalSchedule(every=spec.eval_every_samples, offline=True),  # as the rules say
        eval_samples=len(evals.ids),
        max_samples=spec.max_samples,
        log_keys={"train_samples": n},  # the training set's size, as the v3.1 logs give it (6,513,144)
        eval_lines="per_metric",
    )


def generate_and_score(model: torch.nn.Module, spec: SDSpec, evals: EvalSet, shard: tuple[int, int], autocast,
                       device: torch.device) -> EvalShard:
    """This rank's captions [r*n/R, (r+1)*n/R): generated, then embedded for FID and CLIP."""
    mine = shard_rows(len(evals.ids), shard)
    lo, hi = mine.start, mine.stop
    features, cosine_sum = [], torch.zeros((), dtype=torch.float64)
    latent_shape = (spec.unet.channels, spec.unet.sample_size, spec.unet.sample_size)
    for start in range(lo, hi, EVAL_BATCH):
        index = range(start, min(start + EVAL_BATCH, hi))
        noise = torch.stack([torch.randn(latent_shape, generator=torch.Generator().manual_seed(EVAL_NOISE_SEED + i))
                             for i in index]).to(device)
        ids = evals.ids[start:start + len(index)].to(device)
        latents = diffusion.sample(model, ids, evals.empty_ids.to(device), noise, spec.ddim_steps, spec.guidance,
                                   autocast)
        images = evals.decode(latents.float() / spec.latent_scale).float().cpu()
        features.append(evals.features(images).cpu())
        cosine_sum += evals.clip_cosine(images, ids.cpu()).double().sum()
    gathered = [torch.cat(features)] if features else []
    return EvalShard(sums={"cosine_sum": cosine_sum, "images": torch.tensor(float(hi - lo), dtype=torch.float64)},
                     gathered=gathered)
