"""Turns a GPT-3 member's spec into a training job: data, model, metric, target, log keys."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.errors import ResourceError, UsageError
from trainclock.train.job import TrainJob
from trainclock.train.optim import OptimConfig
from trainclock.workloads.gpt3.data.batches import train_batch, validation_set
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.workloads.gpt3.data.prepare import prepare
from trainclock.workloads.gpt3.data.sources import parse_source
from trainclock.workloads.gpt3.model import GPT
from trainclock.workloads.gpt3.parallelize import check_layout, parallelize
from trainclock.workloads.gpt3.pipeline import PipelinedGPT, check_microbatches, pipeline_micro_batch
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
    return replace(spec, micro_batch_size=micro)


def check_batch_split(spec: GPT3Spec, data_parallel: int) -> None:
    """Every data-parallel rank gets an equal, whole number of micro-batches of each global batch."""
    per_rank, remainder = divmod(spec.global_batch_size, data_parallel)
    micro = min(spec.micro_batch_size, per_rank)
    if remainder or per_rank == 0 or per_rank % micro:
        raise UsageError(f"global batch size {spec.global_batch_size} cannot be split evenly over {data_parallel} "
                         f"data-parallel ranks in micro-batches of {micro}; pick a --gbs divisible by both")


def pipeline_batch(spec: GPT3Spec, layout: Layout, micro_given: bool) -> GPT3Spec:
    """A pipeline needs several micro-batches per step to keep its ranks busy: without
    --micro-batch, pick the largest that gives each data-parallel rank at least pp of them;
    with it, check that the schedule can run it."""
    if layout.pp == 1:
        return spec
    per_rank = spec.global_batch_size // layout.dp
    if not micro_given:
        spec = replace(spec, micro_batch_size=pipeline_micro_batch(per_rank, layout.pp, layout.pp_schedule))
    problem = check_microbatches(layout.pp_schedule, per_rank // min(spec.micro_batch_size, per_rank), layout.pp)
    if problem:
        raise UsageError(f"{problem}: each data-parallel rank gets {per_rank} sequence(s) per step; pass a smaller "
                         "--micro-batch, a larger --gbs, or --pp-schedule gpipe")
    return spec


def check_fits(spec: GPT3Spec, device: torch.device, shards: int = 1) -> None:
    """Refuse, with the numbers, a member that cannot train on this device (model states are
    divided over `shards` processes: FSDP, tensor and pipeline parallel)."""
    need = spec.training_memory_bytes(shards=shards)
    have = _available_memory(device)
    if have is not None and need > 0.9 * have:
        params = spec.shape.parameter_count() / 1e9
        raise ResourceError(
            f"{spec.name} needs about {need / 2**30:,.0f} GiB to train on each of {shards} {device.type} process(es) "
            f"(16 bytes x {params:.1f}B parameters for weights, gradients and Adam states, plus activations of "
            f"{spec.micro_batch_size} sequence(s)); this machine has {have / 2**30:,.0f} GiB available. "
            "Use a smaller member (e.g. gpt3-mini) or a GPU cluster"
        )


def build_job(spec: GPT3Spec, data: str | None, seed: int, ctx: ParallelContext, device: torch.device,
              compile: bool = False, eval_sequences: int | None = None) -> TrainJob:
    check_layout(spec.shape, ctx.layout)
    source = parse_source(data or spec.corpus)
    prepared = ctx.main_first(lambda: prepare(source, spec.shape.vocab_size))  # one rank tokenizes
    if prepared.tokenizer.get_vocab_size() > spec.shape.vocab_size:
        raise UsageError(f"tokenizer in {prepared.folder} has more tokens than {spec.name}'s vocabulary")
    n_eval = eval_sequences or spec.eval_sequences
    val_x, val_y = validation_set(prepared.val, n_eval, spec.seq_len)
    train_batch(prepared.train, seed, 0, 1, spec.seq_len)  # fails now, in init, if the split is too small

    torch.manual_seed(seed)  # the same initial weights on every rank and at every world size
    micro = min(spec.micro_batch_size, spec.global_batch_size // ctx.dp_size)
    model = parallelize(GPT(spec.shape).to(device), ctx, compile, device,
                        microbatches=spec.global_batch_size // ctx.dp_size // micro)

    def batch(step: int):
        return train_batch(prepared.train, seed, step, spec.global_batch_size, spec.seq_len)

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> tuple[float, int]:
        """Summed next-token cross-entropy (nats) over this shard of the fixed validation set.
        Every shard runs the same number of forwards (FSDP ranks must meet in each one)."""
        rank, ranks = shard
        rows = range(rank * n_eval // ranks, (rank + 1) * n_eval // ranks)
        micro = spec.micro_batch_size
        forwards = math.ceil(math.ceil(n_eval / ranks) / micro)
        m.eval()
        total = torch.zeros((), dtype=torch.float64, device=device)
        with torch.no_grad():
            for i in range(forwards):
                idx = list(rows[i * micro : (i + 1) * micro])
                weight = len(idx)
                idx = idx or [0]  # a rank out of rows still joins the forward, weighted 0
                x, y = val_x[idx].to(device), val_y[idx].to(device)
                with autocast():
                    loss = m.pipeline_eval(x, y) if isinstance(m, PipelinedGPT) else m(x, y)
                total += loss.double() * weight
        m.train()
        return float(total), len(rows)

    s = spec.shape
    return TrainJob(
        workload=spec.name,
        mlperf_benchmark=spec.mlperf_benchmark,
        division="closed" if spec.name == "gpt3-175b" and source.name == "c4" else "open",
        model=model,
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
