"""sd-laion400m's inputs, all local (never downloaded), each missing one a single line naming it:
  --data FOLDER         the webdataset shards (*.tar: .npy VAE moments + .txt captions, as the
                        reference's laion400m-convert-images-to-moments writes them), optionally
                        metadata *.parquet (rows with LICENSE "?" are dropped, as filter-metadata.py
                        does), and val2014_30k.tsv (the COCO-2014 evaluation captions)
  --checkpoint DIR      the SD2 checkpoint in diffusers' layout: text_encoder/ (CLIPTextModel, the
                        OpenCLIP ViT-H/14 text tower to its penultimate layer), tokenizer/
                        (vocab.json, merges.txt) and vae/ (AutoencoderKL, to decode generated latents);
                        without the flag, the data folder's checkpoint/ where it has one
  --evaluators DIR      fid_features.pt (TorchScript: images in [0, 1] -> Inception pool3 features),
                        clip.pt (TorchScript: (images, token ids) -> cosine per image, ViT-H/14) and
                        val2014_30k_stats.npz (the FID reference statistics); without the flag, the
                        data folder's evaluators/ where it has one
The shards are indexed once (data/shard_index.py) and each step reads its batch's samples from them.
A job on the meta device (a dry run, or benchmarks/host_pipeline.py timing the batches) reads the
shards, the captions and the tokenizer but no weights: the text encoder is built on meta from its
shape, and evaluation, which needs the VAE and the evaluators, never runs there."""

from __future__ import annotations

from pathlib import Path

import torch

from trainclock.errors import DataError, UsageError
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion.data.formats import licensed_keys, read_captions_tsv, read_fid_stats
from trainclock.workloads.stable_diffusion.data.shard_index import LazyCaptions, LazyMoments, shard_index
from trainclock.workloads.stable_diffusion.data.sets import EvalSet, TrainSet
from trainclock.workloads.stable_diffusion.spec import SDSpec
from trainclock.workloads.stable_diffusion.text import ClipTokenizer

CAPTIONS_TSV = "val2014_30k.tsv"
FID_STATS = "val2014_30k_stats.npz"


def _folder(settings: RunSettings, flag: str, data: Path) -> Path:
    value = settings.extra.get(flag.lstrip("-").replace("-", "_"))
    if not value:
        inside = data / flag.lstrip("-")  # <data>/checkpoint, <data>/evaluators: one folder holds a whole set
        if inside.is_dir():
            return inside
        raise UsageError(f"sd-laion400m needs {flag} DIR, or a {inside.name}/ folder in --data (see `trainclock "
                         "run stable_diffusion --help`); pretrained weights are never downloaded")
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise DataError(f"{flag} {folder} is not a folder")
    return folder


def _needs(path: Path) -> Path:
    if not path.exists():
        raise DataError(f"missing {path}: sd-laion400m reads it from local files only")
    return path


def _licensed(folder: Path) -> set[str] | None:
    """The keys the metadata parquets keep (None without any parquet: every sample is used). Parquets
    that license no sample at all keep none: an empty set, refused here rather than read as "no parquet"."""
    parquets = sorted(folder.glob("*.parquet"))
    if not parquets:
        return None
    keys = set().union(*(licensed_keys(p) for p in parquets))
    if not keys:
        raise DataError(f"the parquet licenses none of the samples: every row of the {len(parquets)} metadata "
                        f"parquet(s) in {folder} has LICENSE \"?\", which the reference drops; use the parquets "
                        "of the shards' licensed samples, or remove them to train on every sample")
    return keys


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _pretrained(cls, folder: Path, what: str):
    """A diffusers/transformers model from its local folder, or one DataError line naming the folder."""
    _needs(folder)
    if not folder.is_dir() or not any(folder.iterdir()):
        raise DataError(f"{folder} is empty: it must hold {what} in diffusers' layout (config.json and the "
                        "weights, as the SD2 checkpoint has them)")
    try:
        return cls.from_pretrained(folder, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - transformers and diffusers raise OSError, ValueError, EnvironmentError, ...
        raise DataError(f"cannot load {what} from {folder} ({_first_line(e)}); it must be the SD2 checkpoint's "
                        f"{folder.name}/ folder in diffusers' layout") from None


def _torchscript(path: Path, what: str) -> torch.jit.ScriptModule:
    _needs(path)
    try:
        return torch.jit.load(str(path))
    except Exception as e:  # noqa: BLE001 - torch raises RuntimeError, ValueError, ... on a file that is not TorchScript
        raise DataError(f"cannot load {what} from {path} ({_first_line(e)}); it must be a TorchScript file "
                        "(torch.jit.save)") from None


class NoWeights(torch.nn.Module):
    """Where the VAE decoder, the FID network and the CLIP scorer stand in a job that read no weights."""

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        raise UsageError("this sd-laion400m job was built on the meta device, without weights: it cannot "
                         "evaluate; build it on a real device with --checkpoint and --evaluators")


def build_official(spec: SDSpec, settings: RunSettings, weights: bool = True):
    """(train set, eval set, text encoder) from the local files; with `weights` False (the meta
    device) the text encoder is None (build_model makes one of SD2's shape) and nothing else is loaded."""
    data = Path(settings.data).expanduser()
    checkpoint = _folder(settings, "--checkpoint", data)
    evaluators = _folder(settings, "--evaluators", data) if weights else None  # refused before the shards' scan
    tokenizer = ClipTokenizer(_needs(checkpoint / "tokenizer"), spec.text_length)
    index = shard_index(data, lambda: _licensed(data))
    train = TrainSet(LazyMoments(index), LazyCaptions(index, tokenizer), moments=True)
    rows = read_captions_tsv(_needs(data / CAPTIONS_TSV))[:spec.eval_captions]
    eval_ids = tokenizer([caption for _, _, caption in rows])
    if not weights:
        absent = NoWeights()
        return train, EvalSet(eval_ids, tokenizer([""]), absent, absent, absent, {}), None

    from diffusers import AutoencoderKL
    from transformers import CLIPTextModel

    assert evaluators is not None
    reference = read_fid_stats(_needs(evaluators / FID_STATS))  # the cheap reads first: a bad file fails fast
    text_encoder = _pretrained(CLIPTextModel, checkpoint / "text_encoder", "the SD2 text encoder (CLIPTextModel)")
    vae = _pretrained(AutoencoderKL, checkpoint / "vae", "the SD2 VAE (AutoencoderKL)").eval().requires_grad_(False)
    features = _torchscript(evaluators / "fid_features.pt", "the FID feature network").eval()
    clip = _torchscript(evaluators / "clip.pt", "the CLIP scorer").eval()

    def decode(latents: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return (vae.decode(latents.to(next(vae.parameters()).dtype)).sample.float() + 1).div(2).clamp(0, 1)

    evals = EvalSet(eval_ids, tokenizer([""]), decode, features, lambda images, ids: clip(images, ids), reference)
    return train, evals, text_encoder
