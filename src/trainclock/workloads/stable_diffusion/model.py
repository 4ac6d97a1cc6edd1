"""The networks: diffusers' UNet2DConditionModel (SD v2's configuration for the full size, a small
one for the tiers), the frozen text encoder (transformers' CLIPTextModel: SD2's OpenCLIP ViT-H/14
text tower as diffusers converts it, or the tiers' tiny CLIP text tower), and the frozen image
codec (SD2's AutoencoderKL, whose latents the official shards already hold as moments; for the
tiers a fixed, exactly invertible space-to-depth codec instead of a trained VAE: say so)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from trainclock.optim.ema import WeightAverage

if TYPE_CHECKING:
    from diffusers import UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

# diffusers and transformers are imported where a network or its config is built: the registry
# imports this module (through the spec) for every command, and they take seconds to import


@dataclass(frozen=True)
class UNetShape:
    sample_size: int
    channels: int  # latent channels (in and out)
    block_out_channels: tuple[int, ...]
    down_block_types: tuple[str, ...]
    up_block_types: tuple[str, ...]
    layers_per_block: int
    attention_head_dim: int | tuple[int, ...]
    cross_attention_dim: int
    use_linear_projection: bool = True
    norm_num_groups: int = 32

    def build(self) -> UNet2DConditionModel:
        from diffusers import UNet2DConditionModel

        return UNet2DConditionModel(
            sample_size=self.sample_size, in_channels=self.channels, out_channels=self.channels,
            block_out_channels=self.block_out_channels, down_block_types=self.down_block_types,
            up_block_types=self.up_block_types, layers_per_block=self.layers_per_block,
            attention_head_dim=self.attention_head_dim, cross_attention_dim=self.cross_attention_dim,
            use_linear_projection=self.use_linear_projection, norm_num_groups=self.norm_num_groups)


# SD v2 (stabilityai/stable-diffusion-2-base unet/config.json; the reference's openaimodel config:
# model_channels 320, channel_mult 1-2-4-4, 64 channels per head, context 1024, linear transformer in/out)
SD2_UNET = UNetShape(
    sample_size=64, channels=4, block_out_channels=(320, 640, 1280, 1280),
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    layers_per_block=2, attention_head_dim=(5, 10, 20, 20), cross_attention_dim=1024)

def sd2_text_config() -> CLIPTextConfig:
    """OpenCLIP ViT-H/14's text tower up to its penultimate layer (the reference's layer: "penultimate"),
    as diffusers' SD2 checkpoints store it: 23 of its 24 layers, width 1024, 16 heads."""
    from transformers import CLIPTextConfig

    return CLIPTextConfig(vocab_size=49408, hidden_size=1024, intermediate_size=4096, num_hidden_layers=23,
                          num_attention_heads=16, max_position_embeddings=77, hidden_act="gelu",
                          projection_dim=1024)


@cache
def parameter_count(shape: UNetShape) -> int:
    """The UNet's parameters, counted on the meta device (no memory)."""
    with torch.device("meta"):
        return sum(p.numel() for p in shape.build().parameters())


class SpaceToDepth(nn.Module):
    """The tiers' image codec: pixels in [0, 1] -> [-1, 1] -> 2 x 2 space-to-depth (32 x 32 x 3 ->
    16 x 16 x 12), exactly invertible. It stands where SD's frozen VAE does; a trained tiny VAE
    cost more preparation time than it taught the benchmark."""

    factor = 2

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        return F.pixel_unshuffle(images * 2 - 1, self.factor)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        return (F.pixel_shuffle(latents, self.factor) + 1).div(2).clamp(0, 1)


class Conditioned(nn.Module):
    """What trains: the UNet, with the frozen text encoder beside it (its weights are part of the
    model's state so a checkpoint restores the whole pipeline, but no gradient reaches them)."""

    def __init__(self, unet: UNet2DConditionModel, text_encoder: CLIPTextModel, ema_decay: float | None = None):
        super().__init__()
        self.unet = unet
        self.text_encoder = text_encoder.requires_grad_(False).eval()
        # the UNet's weight average, which the optimizer steps and evaluation reads (optim/ema.averaged)
        self.ema = WeightAverage(unet, ema_decay) if ema_decay is not None else None

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.text_encoder(input_ids=ids).last_hidden_state

    def forward(self, latents: torch.Tensor, timesteps: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.unet(latents, timesteps, encoder_hidden_states=self.encode_text(ids)).sample

    def train(self, mode: bool = True) -> "Conditioned":
        super().train(mode)
        self.text_encoder.eval()  # frozen: no dropout ever
        return self


def tiny_text_config(vocab: int, width: int, length: int) -> CLIPTextConfig:
    from transformers import CLIPTextConfig

    return CLIPTextConfig(vocab_size=vocab, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=2,
                          num_attention_heads=2, max_position_embeddings=length, projection_dim=width,
                          bos_token_id=1, eos_token_id=2, pad_token_id=0)
