"""A CPU tier's start checkpoint, made once during data preparation (untimed) like the reference's
phase-1 checkpoint: a short pre-training from random init, reproducible from its seed, cached beside
the prepared data. AdamW, not LAMB: at these widths and a few hundred steps LAMB's per-layer trust
ratio leaves a random-init BERT on its unigram plateau far longer (measured: masked-LM accuracy
0.054 after 100 steps at LAMB lr 4e-2, 0.067 with AdamW 2e-3)."""

from __future__ import annotations

from pathlib import Path

import torch

from trainclock.optim.adamw import AdamW
from trainclock.optim.schedules import WarmupCosine
from trainclock.storage import atomic_writer, cache_key
from trainclock.workloads.bert.data.batches import train_batch
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import BertSpec

PHASE1_SEED = 4242
PHASE1_BATCH = 32


def phase1_path(folder: Path, spec: BertSpec) -> Path:
    key = cache_key(spec.shape, spec.phase1_steps, spec.phase1_learning_rate, PHASE1_SEED)
    return folder / f"phase1-{spec.name}-{key}.pt"


def make_phase1(spec: BertSpec, train: dict[str, torch.Tensor], path: Path) -> Path:
    """Train from random init for spec.phase1_steps steps (fp32, one process) and save the weights."""
    if path.exists():
        return path
    torch.manual_seed(PHASE1_SEED)
    model = build_model(spec.shape, spec.dropout)
    lr, steps = spec.phase1_learning_rate, spec.phase1_steps
    setup = AdamW(WarmupCosine(lr, lr / 10, max(1, steps // 10), steps), beta2=0.999, weight_decay=0.01)
    optimizer = setup.build(model)
    for step in range(spec.phase1_steps):
        for group in optimizer.param_groups:
            group["lr"] = setup.lr_at(step)
        loss = model(**train_batch(train, PHASE1_SEED, step, PHASE1_BATCH))[0]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    with atomic_writer(path, "wb") as f:
        torch.save(model.state_dict(), f)
    return path
