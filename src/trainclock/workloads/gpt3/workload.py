"""The GPT-3 benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (data, model, metric, target, optimizer, MLPerf log keys)."""

from __future__ import annotations

import argparse
import functools
import re
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.datasets import shakespeare
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import Materialize, builds_on_meta
from trainclock.errors import ResourceError, UsageError
from trainclock.optim.adamw import AdamW
from trainclock.optim.schedules import WarmupCosine
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.evaluation import equal_forwards, shard_rows
from trainclock.workload.spec_base import division
from trainclock.workloads.gpt3.data.batches import train_batch, validation_set
from trainclock.workloads.gpt3.data.prepare import prepare
from trainclock.workloads.gpt3.data.sources import parse_source
from trainclock.workloads.gpt3.fp8 import RECIPE as FP8_RECIPE
from trainclock.workloads.gpt3.fp8 import check as check_fp8
from trainclock.workloads.gpt3.model import GPT, init_built_on_meta
from trainclock.workloads.gpt3.parallelize import check_layout, parallelize_gpt
from trainclock.workloads.gpt3.pipeline import PipelinedGPT
from trainclock.workloads.gpt3.spec import MEMBERS, METRIC, MLPERF_ROUND, GPT3Spec, get_member
from trainclock.workloads.gpt3.cost import run_progress

RULES_DATASET = "c4"


class GPT3Workload(BenchmarkWorkload):
    key = "gpt3"
    mlperf_round = MLPERF_ROUND
    title = "GPT-3"
    specs = MEMBERS
    unit = "tokens"
    batch_units = "sequences"
    model_parallel = True
    default_member = "gpt3-mini"  # the member commands mean when they name none (the README's first run)

    def parameter_count(self, spec: GPT3Spec) -> int:
        return spec.shape.parameter_count()

    def describe(self, spec: GPT3Spec) -> str:
        s = spec.shape
        return f"{s.n_layer} layers, d_model {s.d_model}, {s.n_head} heads, context {spec.seq_len}"

    resumed_flags = ("fp8",)  # a resume keeps the run's matmul precision

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--fp8", action="store_true", default=False,
                           help=f"the transformer blocks' matmuls in FP8 (torchao float8 training, {FP8_RECIPE} "
                                "scaling; needs an FP8 GPU: compute capability 8.9+, e.g. H100); default bf16")

    def configure(self, spec: GPT3Spec, settings: RunSettings, layout: Layout, device: torch.device) -> GPT3Spec:
        if settings.extra.get("fp8"):
            check_fp8(device)  # refused now, before the run measures and imports for a minute
            spec = replace(spec, fp8=True)
        return spec

    def check_layout(self, spec: GPT3Spec, layout: Layout) -> None:
        check_layout(spec.shape, layout)

    def check_run(self, spec: GPT3Spec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        check_fits(spec, device, shards=layout.world_size if layout.fsdp else layout.tp * layout.pp)

    def build_job(self, spec: GPT3Spec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        return build_job(spec, settings.data, seed, ctx, device, settings.compile, settings.activation_checkpointing)

    def build_model(self, spec: GPT3Spec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        return build_model(spec, ctx, device, settings.compile, settings.activation_checkpointing)

    def optimizer(self, spec: GPT3Spec) -> AdamW:
        return optimizer(spec)

    def sample_loss(self, spec: GPT3Spec, model: torch.nn.Module, rows: int,
                    device: torch.device) -> torch.Tensor | list[torch.Tensor]:
        tokens = torch.randint(0, spec.shape.vocab_size, (rows, spec.seq_len + 1), device=device)
        x, y = tokens[:, :-1], tokens[:, 1:]
        return model.forward_stages(x) if isinstance(model, PipelinedGPT) else model(x, y)

    def fetch_data(self) -> str:
        return f"default corpus of the CPU members in {shakespeare.fetch()}"

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        prepared = prepare(parse_source(data or spec.corpus), spec.shape.vocab_size, force=force)
        return (f"{len(prepared.train):,} train and {len(prepared.val):,} validation tokens "
                f"(vocabulary {prepared.vocab_size}) in {prepared.folder}")

    def cost(self, member: str):
        from trainclock.workloads.gpt3.cost import cost_model

        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        from trainclock.workloads.gpt3.data.sample import write_sample

        return write_sample(get_member(member), folder, samples, seed)


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
              compile: bool = False, activation_checkpointing: bool = False,
              eval_sequences: int | None = None) -> TrainJob:
    check_layout(spec.shape, ctx.layout)

    def prepare_source():
        source = parse_source(data or spec.corpus)  # may fetch the default corpus: one rank does
        return source, prepare(source, spec.shape.vocab_size)

    source, prepared = ctx.main_first(prepare_source)  # one rank tokenizes
    if prepared.tokenizer.get_vocab_size() > spec.shape.vocab_size:
        raise UsageError(f"tokenizer in {prepared.folder} has more tokens than {spec.name}'s vocabulary")
    n_eval = eval_sequences or spec.eval_sequences
    val_x, val_y = validation_set(prepared.val, n_eval, spec.seq_len)
    train_batch(prepared.train, seed, 0, 1, spec.seq_len)  # fails now, in init, if the split is too small

    torch.manual_seed(seed)  # the same initial weights on every rank and at every world size (built whole)
    model = build_model(spec, ctx, device, compile, activation_checkpointing)

    def batch(step: int, rows: slice):
        return train_batch(prepared.train, seed, step, spec.global_batch_size, spec.seq_len, rows)

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        """Summed next-token cross-entropy (nats) over this shard of the fixed validation set.
        Every shard runs the same number of forwards (FSDP ranks must meet in each one)."""
        rows = shard_rows(n_eval, shard)
        micro = spec.micro_batch_size
        total = torch.zeros((), dtype=torch.float64, device=device)
        for i in range(equal_forwards(n_eval, shard[1], micro)):
            idx = list(rows[i * micro : (i + 1) * micro])
            weight = len(idx)
            idx = idx or [0]  # a rank out of rows still joins the forward, weighted 0
            x, y = val_x[idx].to(device), val_y[idx].to(device)
            with autocast():
                loss = m.pipeline_eval(x, y) if isinstance(m, PipelinedGPT) else m(x, y)
            total += loss.double() * weight
        return EvalShard(sums={"nll": total.cpu(), "sequences": torch.tensor(float(len(rows)), dtype=torch.float64)})

    def score(stats: EvalShard) -> dict[str, float]:
        return {METRIC: float(stats.sums["nll"] / stats.sums["sequences"])}

    return gpt3_job(spec, model, batch, evaluate, score, dataset=source.name, eval_sequences=n_eval)


def build_model(spec: GPT3Spec, ctx: ParallelContext, device: torch.device, compile: bool = False,
                activation_checkpointing: bool = False, on_meta: bool | None = None) -> torch.nn.Module:
    """GPT as this rank trains it, initialised from the current random state. Built whole and then
    cut up to a billion parameters (the same weights under every layout); above, or with `on_meta`,
    built on the meta device, cut there, and only this rank's shards materialised and initialised."""
    micro = min(spec.micro_batch_size, spec.global_batch_size // ctx.dp_size)
    if spec.fp8:
        check_fp8(device)
    options = {"fp8": spec.fp8, "compile": compile, "activation_checkpointing": activation_checkpointing,
               "microbatches": spec.global_batch_size // ctx.dp_size // micro}
    if not (builds_on_meta(spec.shape.parameter_count(), device) if on_meta is None else on_meta):
        return parallelize_gpt(GPT(spec.shape).to(device), ctx, **options)
    with torch.device("meta"):
        model = GPT(spec.shape)
    init = functools.partial(init_built_on_meta, n_layer=spec.shape.n_layer)
    return parallelize_gpt(model, ctx, materialize=Materialize(device, init), **options)


def gpt3_job(spec: GPT3Spec, model: torch.nn.Module, batch, evaluate, score, dataset: str,
             eval_sequences: int) -> TrainJob:
    """The job around a built model; tests build one with a stand-in model to write logs."""
    return member_job(
        spec,
        division=division(spec, dataset, RULES_DATASET),
        model=model,
        batch=batch,
        loss=lambda m, b: m(*b),
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=spec.shape.flops_per_token(spec.seq_len) * spec.seq_len,
        optimizer=optimizer(spec),
        eval_schedule=EvalSchedule(every=spec.eval_every_samples),
        eval_samples=eval_sequences * spec.seq_len,  # MLPerf gpt3 logs eval_samples in tokens
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, dataset),
        linear_precision="fp8" if spec.fp8 else None,
    )


def optimizer(spec: GPT3Spec) -> AdamW:
    return AdamW(WarmupCosine(spec.learning_rate, spec.end_learning_rate, spec.warmup_steps, spec.decay_steps),
                 beta1=spec.adam_beta1, beta2=spec.adam_beta2, eps=spec.adam_eps, weight_decay=spec.weight_decay,
                 gradient_clip_norm=spec.gradient_clip_norm)


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
    if spec.fp8:  # a result says its blocks' matmuls ran in FP8 (bf16 logs keep their keys)
        keys["trainclock_fp8"] = f"torchao float8 {FP8_RECIPE}"
    return keys


def _available_memory(device: torch.device) -> int | None:
    if device.type == "meta":
        return None  # a dry run, which measures the fit itself
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free
    try:
        text = Path("/proc/meminfo").read_text()
        return int(re.search(r"MemAvailable:\s+(\d+)", text).group(1)) * 1024
    except (OSError, AttributeError):
        return None
