"""The Stable Diffusion family: every member's UNet, data, hyperparameters, evaluation and target.

sd-laion400m is MLPerf Training v3.1 closed `stable_diffusion` (the reference's
configs/train_*.yaml): the SD v2 UNet (865.9M parameters) trained on the filtered LAION-400M subset
(6,513,144 images, stored as VAE moments in webdataset shards) with the frozen OpenCLIP ViT-H/14
text tower (penultimate layer), v-prediction on the scaled-linear DDPM schedule, AdamW (0.9, 0.999,
1e-8, weight decay 0.01) at 1.25e-7 x GBS after a linear warmup over 1,000 steps from 1e-6 of it;
every 512,000 images it generates 30,000 COCO-2014 validation captions with DDIM 50 steps and
guidance 8.0 and scores FID (Inception, against val2014_30k_stats.npz) and CLIP score (ViT-H/14),
to FID <= 90 and CLIP >= 0.15 at the same step. The tiers are the same code path on captioned
Fashion-MNIST items (data/captioned.py) with a small UNet, tiny evaluators, fewer DDIM steps and
fewer evaluation captions; their targets come from reference runs whose evidence sits in targets/."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target
from trainclock.workloads.stable_diffusion.metric import CLIP, FID
from trainclock.workloads.stable_diffusion.model import SD2_UNET, UNetShape, parameter_count

MLPERF_ROUND = "3.1"  # the MLPerf Training round whose closed rules and reference points this benchmark follows

LAION_TRAIN_IMAGES = 6_513_144  # the filtered subset the reference trains on (train_samples in the v3.1 logs)
COCO_EVAL_CAPTIONS = 30_000
EVAL_EVERY_IMAGES = 512_000


@dataclass(frozen=True)
class SDSpec(MemberSpec):
    unet: UNetShape
    dataset: str  # "laion" (official, --data) or "captioned" (generated for a CPU tier)
    base_lr_per_sample: float  # lr = this x global batch size
    warmup_steps: int
    eval_every_samples: int
    eval_captions: int
    ddim_steps: int
    guidance: float
    max_samples: int
    train_images: int
    text_length: int = 77
    text_width: int = 1024
    drop_caption: float = 0.0  # the tiers train unconditionally on a share of captions, so guidance has a baseline
    warmup_start: float = 1e-6  # the reference's LambdaLinearScheduler f_start
    decay_steps: tuple[int, ...] = ()  # 0.1 step decays: none in the reference, a CPU tier's own
    # evaluate an exponential moving average of the UNet's weights with this decay (the reference's
    # use_ema, off in the MLPerf configs): None trains and evaluates the weights themselves
    ema_decay: float | None = None
    latent_scale: float = 0.18215  # the reference's scale_factor on the VAE latents
    mlperf_benchmark: str = "stable_diffusion"

    @property
    def learning_rate(self) -> float:
        return self.base_lr_per_sample * self.global_batch_size

    def parameter_count(self) -> int:
        return parameter_count(self.unet)

    def with_batch(self, global_batch_size: int) -> "SDSpec":
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of images, got {global_batch_size}")
        return replace(self, global_batch_size=global_batch_size,
                       micro_batch_size=min(self.micro_batch_size, global_batch_size))


def _tier(name: str, blocks: tuple[int, ...], **fields) -> SDSpec:
    unet = UNetShape(sample_size=16, channels=12, block_out_channels=blocks,
                     # attention at the 8 x 8 level only, 2 heads: CPU attention over 16 x 16 tokens with
                     # heads of 2-4 channels took 70% of a step (torch's flash kernel for CPU)
                     down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                     up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), layers_per_block=1,
                     attention_head_dim=2, cross_attention_dim=64, norm_num_groups=8)
    return SDSpec(name=name, unet=unet, dataset="captioned",
                  **recorded_target(__package__, name, [(FID, "lower"), (CLIP, "higher")]),
                  text_length=10, text_width=64, drop_caption=0.1, latent_scale=1.0, **fields)


def _laion() -> SDSpec:
    return SDSpec(name="sd-laion400m", unet=SD2_UNET, dataset="laion", global_batch_size=512, micro_batch_size=8,
                  base_lr_per_sample=1.25e-7, warmup_steps=1000, eval_every_samples=EVAL_EVERY_IMAGES,
                  eval_captions=COCO_EVAL_CAPTIONS, ddim_steps=50, guidance=8.0,
                  # evaluation is offline (after training), so every run trains to this limit: the
                  # v3.1 RCPs converge within 6,000 steps at 512 (3.1M images) and 2,250 at 2,048 (4.6M)
                  max_samples=10 * EVAL_EVERY_IMAGES, train_images=LAION_TRAIN_IMAGES,
                  **rules_target([(FID, "lower", 90.0), (CLIP, "higher", 0.15)],
                                 f"Training v{MLPERF_ROUND} closed stable_diffusion rules"))


def _members() -> list[SDSpec]:
    # tiers: a higher rate than 1.25e-7 x GBS (which suits a pretrained-scale run of thousands of
    # steps), a short warmup, 8 (mini) / 5 (tiny) DDIM steps so evaluation stays cheap, and guidance
    # 1.5: at 3 a seed's FID rose again as its text fit grew (sd-mini seed 2: 1,227 -> 1,900 over its
    # last 4 evaluations, a target met and lost); the same run scored at 1.5 stays at 1,090-1,132
    # budgets reach past the early phase where a seed's CLIP score still swings by 0.1 between
    # evaluations (sd-mini: 0.17-0.27 up to 2,560 images, 0.36-0.41 at 5,120 over seeds 1-3);
    # 128 captions, as 16 / 32 made the score a draw of the starting noise as much as of the model
    # sd-tiny: mini's UNet, data, budget and schedule (the 16-32 UNet learned no text fit in 6,400 images:
    # CLIP 0.27 -> 0.29; on 1,024 images mini's UNet did, but two seeds of five stalled at CLIP 0.41-0.44;
    # on 8,960 images, decayed at 3/4, seed 3's text fit came late (CLIP 0.385 where others reached
    # 0.47-0.56), and a 1.5x rate made it later), evaluated with 5 DDIM steps
    tiny = _tier("sd-tiny", (32, 64), global_batch_size=16, micro_batch_size=16, base_lr_per_sample=1e-4,
                 warmup_steps=10, eval_every_samples=1_280, eval_captions=128, ddim_steps=5, guidance=1.5,
                 max_samples=12_800, train_images=8_000, decay_steps=(540, 648), ema_decay=0.99)
    # sd-mini's rate falls by 0.1 at steps 540 and 648 (8,640 and 10,368 images; the reference holds it):
    # without, FID and CLIP still improved at 8,960 images. The budget runs two evaluations past the
    # second decay: ending at 11,520, the median CLIP still gained 0.56-0.58 of its mean gain per
    # evaluation over the last one (the tier rule's limit is 0.5); at 12,800, 0.06. It is scored
    # on a weight average (the reference's use_ema, decay 0.99 for a 800-step run): the weights themselves
    # moved FID by 100-200 every 16 steps (while 4 draws of the evaluation noise moved it by 30), so
    # FID's evaluation-to-evaluation noise was 0.13 of the gain to the target; with the average, 0.03
    mini = _tier("sd-mini", (32, 64), global_batch_size=16, micro_batch_size=16, base_lr_per_sample=1e-4,
                 warmup_steps=10, eval_every_samples=1_280, eval_captions=128, ddim_steps=8, guidance=1.5,
                 max_samples=12_800, train_images=8_000, decay_steps=(540, 648), ema_decay=0.99)
    return [tiny, mini, _laion()]


MEMBERS: MemberSet[SDSpec] = MemberSet("Stable Diffusion", __package__, _members())
get_member = MEMBERS.member
