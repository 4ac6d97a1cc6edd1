"""A tier's prepared data, made once into <data home>/prepared/<tier>-<key>/ (untimed, from fixed
seeds, never the run's): the training latents and caption ids, the evaluation captions, the tiny
CLIP (its text tower is also the UNet's frozen text encoder) and FID feature network, and the FID
reference statistics of real evaluation images in the official .npz layout (mu, sigma).
tier.pt is written last: its presence means the cache is complete."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainclock.storage import build_once, prepared_path
from trainclock.workloads.stable_diffusion.data import captioned
from trainclock.workloads.stable_diffusion.data.formats import write_fid_stats
from trainclock.workloads.stable_diffusion.evaluators import FeatureNet, TinyClip, train_clip, train_features
from trainclock.workloads.stable_diffusion.model import SpaceToDepth
from trainclock.workloads.stable_diffusion.text import WordTokenizer

FORMAT_VERSION = 1
DATA_SEED = 2023  # the images, captions and evaluators depend on this alone
REFERENCE_IMAGES = 1_000  # real evaluation images behind the FID statistics
FEATURES = 32  # the FID feature width: small, so the covariance is well estimated from few images
EVALUATOR_STEPS = 200


@dataclass
class TierData:
    latents: torch.Tensor  # N x 12 x 16 x 16
    ids: torch.Tensor  # N x L caption token ids
    eval_captions: list[str]
    eval_ids: torch.Tensor
    empty_ids: torch.Tensor  # 1 x L: the empty caption (the unconditional branch of guidance)
    clip: TinyClip
    features: FeatureNet
    reference: dict[str, np.ndarray]  # mu, sigma, count


def tier_folder(name: str, train_images: int, eval_captions: int, length: int, width: int) -> Path:
    return prepared_path(name, FORMAT_VERSION, train_images, eval_captions, length, width, DATA_SEED)


def prepare_tier(name: str, train_images: int, eval_captions: int, length: int, width: int,
                 force: bool = False) -> Path:
    def build(staging: Path) -> None:
        tokenizer = WordTokenizer(captioned.WORDS, length)
        images, captions, labels = captioned.generate("train", train_images, DATA_SEED)
        ids = tokenizer(captions)
        real, eval_text, _ = captioned.generate("val", max(REFERENCE_IMAGES, eval_captions), DATA_SEED + 1)
        clip = train_clip(images, ids, tokenizer.vocab_size, width, EVALUATOR_STEPS, DATA_SEED)
        features = train_features(images, torch.from_numpy(labels), (10, len(captioned.COLOURS), len(captioned.PLACES)),
                                  FEATURES, EVALUATOR_STEPS, DATA_SEED)
        with torch.no_grad():
            f = features(real[:REFERENCE_IMAGES]).numpy()
        write_fid_stats(staging / "reference_stats.npz", f.mean(0), np.cov(f, rowvar=False), len(f))
        torch.save({"clip": clip.state_dict(), "features": features.state_dict(), "vocab": tokenizer.vocab_size},
                   staging / "evaluators.pt")
        torch.save({"latents": SpaceToDepth().encode(images), "ids": ids, "eval_captions": eval_text,
                    "seed": DATA_SEED, "version": FORMAT_VERSION}, staging / "tier.pt")

    return build_once(tier_folder(name, train_images, eval_captions, length, width), "tier.pt", build, force)


def load_tier(name: str, train_images: int, eval_captions: int, length: int, width: int) -> TierData:
    from trainclock.workloads.stable_diffusion.data.formats import read_fid_stats

    folder = prepare_tier(name, train_images, eval_captions, length, width)
    tier = torch.load(folder / "tier.pt", weights_only=True)
    saved = torch.load(folder / "evaluators.pt", weights_only=True)
    clip = TinyClip(saved["vocab"], width, length)
    clip.load_state_dict(saved["clip"])
    features = FeatureNet(FEATURES, (10, len(captioned.COLOURS), len(captioned.PLACES)))
    features.load_state_dict(saved["features"])
    tokenizer = WordTokenizer(captioned.WORDS, length)
    texts = tier["eval_captions"][:eval_captions]
    return TierData(tier["latents"], tier["ids"], texts, tokenizer(texts), tokenizer([""]),
                    clip.eval().requires_grad_(False), features.eval().requires_grad_(False),
                    read_fid_stats(folder / "reference_stats.npz"))
