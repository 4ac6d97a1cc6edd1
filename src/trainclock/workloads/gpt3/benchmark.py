"""Turns a GPT-3 member's spec into a training job: data, model, metric, target, log keys."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from trainclock.errors import ResourceError, UsageError
from trainclock.train.job import TrainJob
from trainclock.train.optim import OptimConfig
from trainclock.workloads.gpt3.data.batches import train_batch, validation_set
from trainclock.workloads.gpt3.data.prepare import prepare
from trainclock.workloads.gpt3.data.sources import parse_source
from trainclock.workloads.gpt3.model import GPT
from trainclock.workloads.gpt3.spec import GPT3Spec

MAX_GLOBAL_BATCH = 1 << 20


def resolve_batch(spec: GPT3Spec, global_batch_size: int | None, micro_batch_size: int | None) -> GPT3Spec:
    """Apply --gbs/--micro-batch overrides, checking that they are sane."""
    if global_batch_size is not None:
        if not 0 < global_batch_size <= MAX_GLOBAL_BATCH:
            raise UsageError(f"global batch size {global_batch_size} is out of range; use 1 to {MAX_GLOBAL_BATCH} sequences")
        spec = spec.with_batch(global_batch_size)
    micro = micro_batch_size or spec.micro_batch_size
    if micro <= 0 or spec.global_batch_size % micro:
        raise UsageError(
            f"micro-batch size {micro} must be positive and divide the global batch size {spec.global_batch_size}"
        )
    from dataclasses import replace

    return replace(spec, micro_batch_size=micro)


def check_fits(spec: GPT3Spec, device: torch.device) -> None:
    """Refuse, with the numbers, a member that cannot train on this device."""
    need = spec.training_memory_bytes()
    have = _available_memory(device)
    if have is not None and need > 0.9 * have:
        params = spec.shape.parameter_count() / 1e9
        raise ResourceError(
            f"{spec.name} needs about {need / 2**30:,.0f} GiB to train on one {device.type} process "
            f"(16 bytes x {params:.1f}B parameters for weights, gradients and Adam states, plus activations of "
            f"{spec.micro_batch_size} sequence(s)); this machine has {have / 2**30:,.0f} GiB available. "
            "Use a smaller member (e.g. gpt3-mini) or a GPU cluster"
        )


def build_job(spec: GPT3Spec, data: str | None, seed: int, device: torch.device, compile: bool = False,
              eval_sequences: int | None = None) -> TrainJob:
    source = parse_source(data or spec.corpus)
    prepared = prepare(source, spec.shape.vocab_size)
    if prepared.tokenizer.get_vocab_size() > spec.shape.vocab_size:
        raise UsageError(f"tokenizer in {prepared.folder} has more tokens than {spec.name}'s vocabulary")
    n_eval = eval_sequences or spec.eval_sequences
    val_x, val_y = validation_set(prepared.val, n_eval, spec.seq_len)
    train_batch(prepared.train, seed, 0, 1, spec.seq_len)  # fails now, in init, if the split is too small

    torch.manual_seed(seed)
    model = GPT(spec.shape).to(device)
    runnable = torch.compile(model) if compile else model

    def batch(step: int):
        return train_batch(prepared.train, seed, step, spec.global_batch_size, spec.seq_len)

    def evaluate(m: torch.nn.Module, autocast) -> float:
        """Validation log perplexity: mean next-token cross-entropy in nats over the fixed set."""
        m.eval()
        total = torch.zeros((), dtype=torch.float64, device=device)
        with torch.no_grad():
            for i in range(0, n_eval, spec.micro_batch_size):
                x, y = val_x[i : i + spec.micro_batch_size].to(device), val_y[i : i + spec.micro_batch_size].to(device)
                with autocast():
                    total += m(x, y).double() * len(x)
        m.train()
        return float(total / n_eval)

    s = spec.shape
    return TrainJob(
        workload=spec.name,
        mlperf_benchmark=spec.mlperf_benchmark,
        division="closed" if spec.name == "gpt3-175b" and source.name == "c4" else "open",
        model=runnable,
        batch=batch,
        evaluate=evaluate,
        metric_name="validation log perplexity (nats/token)",
        target=spec.target_log_perplexity,
        global_batch_size=spec.global_batch_size,
        micro_batch_size=spec.micro_batch_size,
        tokens_per_sample=spec.seq_len,
        flops_per_sample=s.flops_per_token(spec.seq_len) * spec.seq_len,
        optim=optim_config(spec),
        eval_every_samples=spec.eval_every_samples,
        eval_samples=n_eval * spec.seq_len,
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, source.name),
    )


def optim_config(spec: GPT3Spec) -> OptimConfig:
    return OptimConfig(
        learning_rate=spec.learning_rate,
        end_learning_rate=spec.end_learning_rate,
        warmup_steps=spec.warmup_steps,
        decay_steps=spec.decay_steps,
        beta1=spec.adam_beta1,
        beta2=spec.adam_beta2,
        eps=spec.adam_eps,
        weight_decay=spec.weight_decay,
        gradient_clip_norm=spec.gradient_clip_norm,
    )


def log_keys(spec: GPT3Spec, dataset: str) -> dict:
    """The benchmark-specific MLPerf keys, as the official gpt3 logs carry them."""
    s = spec.shape
    keys = {
        "max_sequence_length": spec.seq_len,
        "num_layers": s.n_layer,
        "num_heads": s.n_head,
        "hidden_size": s.d_model,
        "ffn_hidden_size": s.d_ffn,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "vocab_size": s.vocab_size,
        "tokenizer": f"byte-level BPE {s.vocab_size}",
        "dataset": "C4" if dataset == "c4" else dataset,
    }
    if spec.init_checkpoint_step:
        keys["init_checkpoint_step"] = spec.init_checkpoint_step
    return keys


def _available_memory(device: torch.device) -> int | None:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free
    try:
        text = Path("/proc/meminfo").read_text()
        return int(re.search(r"MemAvailable:\s+(\d+)", text).group(1)) * 1024
    except (OSError, AttributeError):
        return None
