"""sd-laion400m's inputs, all local (never downloaded), each missing one a single line naming it:
  --data FOLDER         the webdataset shards (*.tar: .npy VAE moments + .txt captions, as the
                        reference's laion400m-convert-images-to-moments writes them), optionally
                        metadata *.parquet (rows with LICENSE "?" are dropped, as filter-metadata.py
                        does), and val2014_30k.tsv (the COCO-2014 evaluation captions)
  --checkpoint DIR      the SD2 checkpoint in diffusers' layout: text_encoder/ (CLIPTextModel, the
                        OpenCLIP ViT-H/14 text tower to its penultimate layer), tokenizer/
                        (vocab.json, merges.txt) and vae/ (AutoencoderKL, to decode generated latents)
  --evaluators DIR      fid_features.pt (TorchScript: images in [0, 1] -> Inception pool3 features),
                        clip.pt (TorchScript: (images, token ids) -> cosine per image, ViT-H/14) and
                        val2014_30k_stats.npz (the FID reference statistics)
The shards are indexed once (data/shard_index.py) and each step reads its batch's samples from them."""

from __future__ import annotations

from pathlib import Path

import torch

from trainclock.errors import DataError, UsageError
from trainclock.workloads.base import RunSettings
from trainclock.workloads.stable_diffusion.data.formats import licensed_keys, read_captions_tsv, read_fid_stats
from trainclock.workloads.stable_diffusion.data.shard_index import LazyCaptions, LazyMoments, shard_index
from trainclock.workloads.stable_diffusion.data.sets import EvalSet, TrainSet
from trainclock.workloads.stable_diffusion.spec import SDSpec
from trainclock.workloads.stable_diffusion.text import ClipTokenizer

CAPTIONS_TSV = "val2014_30k.tsv"
FID_STATS = "val2014_30k_stats.npz"


def _folder(settings: RunSettings, flag: str) -> Path:
    value = settings.extra.get(flag.lstrip("-").replace("-", "_"))
    if not value:
        raise UsageError(f"sd-laion400m needs {flag} DIR (see `trainclock run stable_diffusion --help`); "
                         "pretrained weights are never downloaded")
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise DataError(f"{flag} {folder} is not a folder")
    return folder


def _needs(path: Path) -> Path:
    if not path.exists():
        raise DataError(f"missing {path}: sd-laion400m reads it from local files only")
    return path


def _licensed(folder: Path) -> set[str] | None:
    """The keys the metadata parquets keep (None without any parquet: every sample is used)."""
    return set().union(*(licensed_keys(p) for p in sorted(folder.glob("*.parquet")))) or None


def build_official(spec: SDSpec, settings: RunSettings):
    from diffusers import AutoencoderKL
    from transformers import CLIPTextModel


    data = Path(settings.data).expanduser()
    checkpoint, evaluators = _folder(settings, "--checkpoint"), _folder(settings, "--evaluators")
    tokenizer = ClipTokenizer(_needs(checkpoint / "tokenizer"), spec.text_length)
    text_encoder = CLIPTextModel.from_pretrained(_needs(checkpoint / "text_encoder"), local_files_only=True)
    vae = AutoencoderKL.from_pretrained(_needs(checkpoint / "vae"), local_files_only=True).eval().requires_grad_(False)
    features = torch.jit.load(str(_needs(evaluators / "fid_features.pt"))).eval()
    clip = torch.jit.load(str(_needs(evaluators / "clip.pt"))).eval()
    index = shard_index(data, lambda: _licensed(data))
    rows = read_captions_tsv(_needs(data / CAPTIONS_TSV))[:spec.eval_captions]
    eval_ids = tokenizer([caption for _, _, caption in rows])

    def decode(latents: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return (vae.decode(latents.to(next(vae.parameters()).dtype)).sample.float() + 1).div(2).clamp(0, 1)

    evals = EvalSet(eval_ids, tokenizer([""]), decode, features, lambda images, ids: clip(images, ids),
                    read_fid_stats(_needs(evaluators / FID_STATS)))
    return TrainSet(LazyMoments(index), LazyCaptions(index, tokenizer), moments=True), evals, text_encoder
