"""A CPU tier's base model: the benchmark fine-tunes a pretrained Llama, so `trainclock data prepare`
first pretrains the tier's small Llama once on the train plays' bytes (next-byte prediction, AdamW,
cosine decay, a fixed seed) and caches it; the timed run then only adapts it, as the reference does.
Pretraining is untimed and outside the run, like the reference's download of Llama 2's weights."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from trainclock.datasets import shakespeare
from trainclock.storage import atomic_write_text, build_once, prepared_path
from trainclock.workloads.llama2_70b_lora.checkpoint import save_base_weights
from trainclock.workloads.llama2_70b_lora.data.task import pretraining_bytes
from trainclock.workloads.llama2_70b_lora.model import Llama, LlamaShape

FORMAT_VERSION = 1
PRETRAIN_SEED = 1234  # the reference's seed: one base model per tier, whatever the run's seed
BASE_FILE = "base.safetensors"


def base_folder(name: str, shape: LlamaShape, steps: int, batch: int, learning_rate: float) -> Path:
    return prepared_path(f"{name}-base", FORMAT_VERSION, shape, steps, batch, learning_rate)


def pretrained_base(name: str, shape: LlamaShape, steps: int, batch: int, learning_rate: float,
                    force: bool = False) -> Path:
    """The tier's pretrained base weights (a safetensors file), trained first if not cached."""

    def build(staging: Path) -> None:
        started = time.perf_counter()
        losses = pretrain(shape, steps, batch, learning_rate, staging / BASE_FILE)
        meta = {"format": FORMAT_VERSION, "shape": repr(shape), "steps": steps, "batch": batch,
                "learning_rate": learning_rate, "seed": PRETRAIN_SEED, "corpus": str(shakespeare.corpus_dir()),
                "first_loss": losses[0], "last_loss": float(np.mean(losses[-20:])),
                "seconds": round(time.perf_counter() - started, 1)}
        atomic_write_text(staging / "meta.json", json.dumps(meta, indent=2))

    return build_once(base_folder(name, shape, steps, batch, learning_rate), "meta.json", build, force) / BASE_FILE


def pretrain(shape: LlamaShape, steps: int, batch: int, learning_rate: float, out: Path) -> list[float]:
    """Train a fresh Llama of `shape` on random windows of the train plays; save it to `out`."""
    data = torch.from_numpy(pretraining_bytes().astype(np.int64))
    generator = torch.Generator().manual_seed(PRETRAIN_SEED)
    torch.manual_seed(PRETRAIN_SEED)
    model = Llama(shape)
    model.init_weights()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:  # cosine decay to a tenth
            group["lr"] = learning_rate * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))
        starts = torch.randint(0, len(data) - shape.context - 1, (batch,), generator=generator)
        window = torch.stack([data[s:s + shape.context + 1] for s in starts.tolist()])
        loss = model(window[:, :-1], window[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    save_base_weights(model, out)
    return losses
