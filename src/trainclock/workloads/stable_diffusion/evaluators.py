"""The tiers' evaluators, trained once when their data is prepared (untimed, cached, from a fixed
seed), standing where the full size has Inception-v3 (FID) and OpenCLIP ViT-H/14 (CLIP score):
  - a tiny CLIP: a small CNN image tower and a CLIPTextModel text tower, trained contrastively on
    the tier's captioned images; its text tower is also the frozen text encoder the UNet is
    conditioned on (SD2 conditions on ViT-H/14's text tower and scores with ViT-H/14 too);
  - an FID feature network: a CNN classifier of item, colour and place on the same images, whose
    penultimate layer gives the features (Inception's pool3 plays that part at full size)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import CLIPTextModel

from trainclock.workloads.stable_diffusion.model import tiny_text_config


def _tower(width: int) -> nn.Sequential:
    # strided from the first layer: 32 x 32 images need no full-resolution features to tell items apart
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.GELU(), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GELU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.GELU(), nn.Flatten(), nn.Linear(64 * 4 * 4, width))


class TinyClip(nn.Module):
    def __init__(self, vocab: int, width: int, length: int):
        super().__init__()
        self.image = _tower(width)
        self.text = CLIPTextModel(tiny_text_config(vocab, width, length))
        self.text_projection = nn.Linear(width, width, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(2.659))  # ln(1/0.07), CLIP's start

    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.image(images), dim=-1)

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text_projection(self.text(input_ids=ids).pooler_output), dim=-1)


class FeatureNet(nn.Module):
    """Classifier of (item, colour, place); `num_features` is what torchmetrics' FID reads."""

    def __init__(self, num_features: int, heads: tuple[int, ...]):
        super().__init__()
        self.num_features = num_features
        self.body = nn.Sequential(_tower(num_features), nn.GELU())
        self.heads = nn.ModuleList(nn.Linear(num_features, n) for n in heads)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Features of images in [0, 1] (float) or [0, 255] (uint8, as torchmetrics passes them)."""
        if images.dtype == torch.uint8:
            images = images.float() / 255
        return self.body(images.float()).double()


def train_clip(images: torch.Tensor, ids: torch.Tensor, vocab: int, width: int, steps: int, seed: int) -> TinyClip:
    """Contrastive training; captions repeat within a batch, so the targets are every matching caption."""
    torch.manual_seed(seed)
    model = TinyClip(vocab, width, ids.shape[1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        pick = torch.randint(0, len(images), (64,), generator=g)
        x, t = images[pick], ids[pick]
        logits = model.logit_scale.exp().clamp(max=100) * model.embed_images(x) @ model.embed_text(t).T
        same = (t[:, None, :] == t[None, :, :]).all(-1).float()
        targets = same / same.sum(1, keepdim=True)
        loss = (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval().requires_grad_(False)


def train_features(images: torch.Tensor, labels: torch.Tensor, heads: tuple[int, ...], width: int, steps: int,
                   seed: int) -> FeatureNet:
    torch.manual_seed(seed)
    model = FeatureNet(width, heads)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        pick = torch.randint(0, len(images), (64,), generator=g)
        features = model.body(images[pick])
        loss = sum(F.cross_entropy(head(features), labels[pick, k]) for k, head in enumerate(model.heads))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval().requires_grad_(False)
