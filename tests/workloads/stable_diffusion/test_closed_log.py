"""sd-laion400m: a short run of the full config (its optimizer, keys, cadence, schedule, sampler and
metrics, data in the official formats: moments shards with a metadata parquet, the captions TSV,
the FID statistics .npz, a diffusers-layout checkpoint and TorchScript evaluators, all written here)
passes the official closed stable_diffusion rules except the target. The 865.9M UNet is counted
on the meta device (test_model.py); the run is a reduced-width copy on 8 x 8 latents."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from tests.workloads.helpers import closed_rule_failures, header_of, run_reduced_full_config
from trainclock.errors import UsageError
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.stable_diffusion import WORKLOAD
from trainclock.workloads.stable_diffusion.data.sample import npy_bytes, write_shard
from trainclock.workloads.stable_diffusion.model import UNetShape
from trainclock.workloads.stable_diffusion.spec import get_member

CHARS = "abcdefghijklmnopqrstuvwxyz"


class Features(nn.Module):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return images.mean(dim=(2, 3)).repeat(1, 2)[:, :4]


class Clip(nn.Module):
    def forward(self, images: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        a = nn.functional.normalize(images.mean(dim=(2, 3)), dim=-1)
        b = nn.functional.normalize(ids[:, :3].float(), dim=-1)
        return (a * b).sum(-1)


def write_checkpoint(root, width: int = 32):
    from diffusers import AutoencoderKL
    from transformers import CLIPTextConfig, CLIPTextModel

    tokenizer = root / "tokenizer"
    tokenizer.mkdir(parents=True)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
        vocab.setdefault(c + "</w>", len(vocab))
    (tokenizer / "vocab.json").write_text(json.dumps(vocab))
    (tokenizer / "merges.txt").write_text("#version: 0.2\n")
    config = CLIPTextConfig(vocab_size=len(vocab), hidden_size=width, intermediate_size=2 * width, num_hidden_layers=1,
                            num_attention_heads=2, max_position_embeddings=77, bos_token_id=0, eos_token_id=1)
    CLIPTextModel(config).save_pretrained(root / "text_encoder")
    AutoencoderKL(block_out_channels=(8,), down_block_types=("DownEncoderBlock2D",), up_block_types=("UpDecoderBlock2D",),
                  layers_per_block=1, norm_num_groups=8, latent_channels=4, sample_size=8).save_pretrained(root / "vae")
    return root


def write_data(root, samples: int = 20):
    root.mkdir()
    rng = np.random.default_rng(0)
    shard = {f"{i:09d}": {"npy": npy_bytes(rng.normal(0, 1, (8, 8, 8)).astype(np.float16)),
                          "txt": f"a photo of thing {CHARS[i % 26]}".encode()} for i in range(samples)}
    write_shard(root / "00000.tar", shard)
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = list(shard)
    pq.write_table(pa.table({"key": keys, "LICENSE": ["?" if i % 5 == 4 else "cc-by" for i in range(samples)]}),
                   root / "00000.parquet")
    (root / "val2014_30k.tsv").write_text("image_id\tid\tcaption\n" +
                                          "".join(f"{i}\t{100 + i}\ta {CHARS[i]} cat\n" for i in range(8)))
    return root


def write_evaluators(root):
    root.mkdir()
    torch.jit.script(Features()).save(str(root / "fid_features.pt"))
    torch.jit.script(Clip()).save(str(root / "clip.pt"))
    np.savez(root / "val2014_30k_stats.npz", mu=np.full(4, 100.0), sigma=np.eye(4) * 0.01)  # far: no target
    return root


@pytest.mark.slow
def test_full_config_log_passes_the_official_closed_stable_diffusion_rules(tmp_path):
    full = get_member("sd-laion400m")
    small = UNetShape(sample_size=8, channels=4, block_out_channels=(32, 32),
                      down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                      up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), layers_per_block=1, attention_head_dim=8,
                      cross_attention_dim=32, norm_num_groups=8)
    spec = replace(full, unet=small, global_batch_size=4, micro_batch_size=4, eval_every_samples=8, eval_captions=8,
                   ddim_steps=2, text_width=32)
    settings = RunSettings(data=str(write_data(tmp_path / "laion")),
                           extra={"checkpoint": str(write_checkpoint(tmp_path / "sd2")),
                                  "evaluators": str(write_evaluators(tmp_path / "evaluators"))})
    log = run_reduced_full_config(WORKLOAD, spec, tmp_path / "out", settings, max_samples=16)
    failed = closed_rule_failures(log)
    assert all("aggregated_eval_accuracy" in f for f in failed), failed  # only the target: FID <= 90 and CLIP >= 0.15
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_division"] == "closed" and header["submission_benchmark"] == "stable_diffusion"
    assert header["opt_adamw_weight_decay"] == 0.01 and header["opt_learning_rate_warmup_steps"] == 1000
    assert header["opt_base_learning_rate"] == pytest.approx(1.25e-7 * 4)
    assert header["train_samples"] == 16 and header["eval_samples"] == 8  # 4 of 20 dropped by the license filter
    lines = [e for e in events if e.key == "eval_accuracy"]
    assert [(e.metadata["step_num"], e.metadata["metric"]) for e in lines] == [(2, "FID"), (2, "CLIP"), (4, "FID"),
                                                                              (4, "CLIP")]


def test_full_config_without_its_files_is_one_clear_line(tmp_path):
    from trainclock.distributed.layout import Layout

    with pytest.raises(UsageError, match="--data FOLDER"):
        WORKLOAD.resolve("sd-laion400m", RunSettings(), Layout(), torch.device("cpu"))
    from trainclock.workloads.stable_diffusion.official import build_official

    with pytest.raises(UsageError, match="--checkpoint DIR"):
        build_official(get_member("sd-laion400m"), RunSettings(data=str(tmp_path)))
