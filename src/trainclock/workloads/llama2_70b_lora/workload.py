"""The llama2_70b_lora benchmark as a workload: its members, the checks a run must pass, and the job
the generic loop trains (the data, Llama with LoRA adapters on a frozen base, the summary-only eval
loss, AdamW with cosine decay, the benchmark's log keys)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from torch import nn

from trainclock.datasets import shakespeare
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import Materialize, ModelParallelism, parallelize
from trainclock.errors import UsageError
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.evaluation import equal_forwards, shard_rows
from trainclock.workload.spec_base import division
from trainclock.workloads.llama2_70b_lora.checkpoint import checkpoint_files, load_base_weights
from trainclock.workloads.llama2_70b_lora.data import scrolls, task
from trainclock.workloads.llama2_70b_lora.data.batches import sample_indices, select
from trainclock.workloads.llama2_70b_lora.data.pretrain import pretrained_base
from trainclock.workloads.llama2_70b_lora.lora import LoraLinear, add_lora
from trainclock.workloads.llama2_70b_lora.model import IGNORE, Llama, rope_tables
from trainclock.workloads.llama2_70b_lora.optim import LoraAdamW
from trainclock.workloads.llama2_70b_lora.spec import BENCHMARK, MEMBERS, METRIC, MLPERF_ROUND, LoraSpec, get_member
from trainclock.workloads.llama2_70b_lora.cost import run_progress

# FSDP2 shards and activation checkpointing recomputes one decoder layer at a time; no TP plan or pipeline cut yet
PARALLELISM = ModelParallelism(blocks=lambda model: model.layers)
RULES_DATASET = "scrolls"


class LlamaLoraWorkload(BenchmarkWorkload):
    key = BENCHMARK
    full_size_flags = "--checkpoint DIR --data GOVREPORT_DIR"
    mlperf_round = MLPERF_ROUND
    title = "Llama 2 70B LoRA"
    specs = MEMBERS
    unit = batch_units = "sequences"
    resumed_flags = ("checkpoint",)  # a resume fine-tunes the same base weights

    def parameter_count(self, spec: LoraSpec) -> int:
        return spec.shape.parameter_count()

    def describe(self, spec: LoraSpec) -> str:
        s = spec.shape
        return (f"{s.n_layer} layers, d_model {s.d_model}, {s.n_head}/{s.n_kv_head} heads, "
                f"LoRA r{spec.lora.rank} ({spec.trainable_parameter_count():,} trained), context {spec.seq_len}")

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--checkpoint", metavar="PATH", default=None,
                           help="the Llama 2 70B weights to fine-tune (a local folder of *.safetensors: MLCommons' "
                                "Llama2-70b-fused-qkv-mlperf); never downloaded. The CPU tiers use their own base")

    def check_run(self, spec: LoraSpec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        if spec.data == RULES_DATASET and device.type != "meta":  # a dry run reads no data and no weights
            if settings.extra.get("checkpoint") is None:
                raise UsageError(f"{spec.name} fine-tunes Llama 2 70B: pass --checkpoint PATH (the local "
                                 "Llama2-70b-fused-qkv-mlperf folder of *.safetensors); weights are never downloaded")
            if settings.data is None:
                raise UsageError(f"{spec.name} trains on SCROLLS GovReport: pass --data FOLDER (the local "
                                 "scrolls_gov_report_8k folder of parquet files); it is never downloaded")
            checkpoint_files(settings.extra["checkpoint"])  # refused now, before init reads the data

    def build_job(self, spec: LoraSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        train, val = ctx.main_first(lambda: load_splits(spec, settings.data))  # one rank parses the corpus
        base = settings.extra.get("checkpoint") or ctx.main_first(lambda: tier_base(spec))
        torch.manual_seed(seed)  # the adapters' initial values: the same on every rank
        model = build_model(spec, ctx, device, settings, base)
        dataset = RULES_DATASET if settings.data is not None else spec.data  # --data is read as the official files
        return lora_job(spec, model, train, val, seed, device, division=division(spec, dataset, RULES_DATASET))

    def build_model(self, spec: LoraSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> nn.Module:
        tier = spec.data != "scrolls" and device.type != "meta"  # a dry run loads no weights
        base = settings.extra.get("checkpoint") or (tier_base(spec) if tier else None)
        return build_model(spec, ctx, device, settings, base)

    def optimizer(self, spec: LoraSpec) -> LoraAdamW:
        return LoraAdamW(spec)

    def sample_loss(self, spec: LoraSpec, model: nn.Module, rows: int, device: torch.device) -> torch.Tensor:
        tokens = torch.randint(0, spec.shape.vocab_size, (rows, spec.seq_len + 1), device=device)
        return model(tokens[:, :-1], tokens[:, 1:])

    def fetch_data(self) -> str | None:
        files = task.play_files()  # one clear line where the corpus is missing
        return f"the CPU tiers' Shakespeare corpus ({len(files)} plays) is in {shakespeare.corpus_dir()}"

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if spec.data == "scrolls" and data is None:
            raise UsageError(f"{spec.name} reads SCROLLS GovReport from a local copy: pass --data FOLDER")
        train, val = load_splits(spec, data)
        line = f"{len(train.inputs):,} training and {len(val.inputs):,} validation sequences of {spec.seq_len} tokens"
        if spec.data != "scrolls":
            line += f"; pretrained base model {tier_base(spec, force)}"
        return line

    def cost(self, member: str):
        from trainclock.workloads.llama2_70b_lora.cost import cost_model

        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        """Random tokens in the official parquet layout at the member's sequence length: `samples`
        training rows and one validation row, each a document followed by a summary of a fifth
        of the sequence (the only labelled tokens)."""
        spec = get_member(member)
        rng = np.random.default_rng(seed)
        for split, rows in (("train", samples), ("val", 1)):
            inputs = rng.integers(0, spec.shape.vocab_size, (rows, spec.seq_len), dtype=np.int64)
            labels = inputs.copy()
            labels[:, : spec.seq_len * 4 // 5] = IGNORE
            scrolls.write_split(Path(folder), split, inputs, labels)
        return str(folder)


def load_splits(spec: LoraSpec, data: str | None) -> tuple[task.TaskSplit, task.TaskSplit]:
    """(train, validation): the official parquet files when --data names them, else the tier's task."""
    if data is not None:
        return scrolls.read_split(data, "train", spec.seq_len), scrolls.read_split(data, "val", spec.seq_len)
    if spec.data == "scrolls":
        raise UsageError(f"{spec.name} trains on SCROLLS GovReport: pass --data FOLDER")
    return task.task_split("train", spec.seq_len), task.task_split("val", spec.seq_len)


def tier_base(spec: LoraSpec, force: bool = False) -> Path:
    return pretrained_base(spec.name, spec.shape, spec.pretrain_steps, spec.pretrain_batch,
                           spec.pretrain_learning_rate, force)


def build_model(spec: LoraSpec, ctx: ParallelContext, device: torch.device, settings: RunSettings,
                base: str | Path | None) -> nn.Module:
    """Llama with adapters on a frozen base, as this rank trains it. The full size is built on the meta
    device (69B parameters); there it stays for a dry run, else the checkpoint's tensors replace the
    meta ones (the whole base, on the host, then moved: a sharded load is still to come). A tier is
    built whole from its pretrained base."""
    on_meta = spec.data == "scrolls" or device.type == "meta"
    with torch.device("meta") if on_meta else torch.device("cpu"):
        model = Llama(spec.shape)
    add_lora(model, spec.lora)  # adapters drawn now, from the run's seed
    if device.type != "meta":
        if base is None:
            raise UsageError(f"{spec.name} needs base weights: pass --checkpoint PATH")
        load_base_weights(model, base)
        if on_meta:
            _materialize_rest(model)
        model = model.to(device)
    # on a meta device (a dry run) the model stays there, or becomes fake tensors under the dry run's mode
    materialize = Materialize(device) if device.type == "meta" else None
    return parallelize(model, ctx, PARALLELISM, compile=settings.compile,
                       activation_checkpointing=settings.activation_checkpointing, materialize=materialize)


def _materialize_rest(model: Llama) -> None:
    """After the checkpoint replaced the base weights: the adapters and the RoPE tables, still on
    the meta device, get real tensors and their initial values."""
    for module in model.modules():
        if isinstance(module, LoraLinear):
            device = module.base_layer.weight.device
            module.lora_A.to_empty(device=device)
            module.lora_B.to_empty(device=device)
            module.reset_adapter()
    model.rope_cos, model.rope_sin = rope_tables(model.shape, model.lm_head.weight.device)


def lora_job(spec: LoraSpec, model: nn.Module, train: task.TaskSplit, val: task.TaskSplit, seed: int,
             device: torch.device, division: str) -> TrainJob:
    """The job around a built model and loaded splits; tests build one directly to write logs."""
    n_train = len(train.inputs)
    if n_train < spec.global_batch_size:
        raise UsageError(f"{n_train} training sequences cannot fill a global batch of {spec.global_batch_size}")
    eval_rows = np.linspace(0, len(val.inputs) - 1, min(spec.eval_sequences, len(val.inputs))).round().astype(int)
    val_x, val_y = select(val.inputs, val.labels, eval_rows)  # a fixed validation set, spread over the split
    n_eval = len(eval_rows)

    def batch(step: int, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return select(train.inputs, train.labels, sample_indices(n_train, seed, step, spec.global_batch_size, rows))

    def evaluate(m: nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        """Summed cross-entropy (nats) and count of the summary tokens of this shard of the
        validation set. Every shard runs the same number of forwards (FSDP ranks meet in each)."""
        rows = shard_rows(n_eval, shard)
        micro = spec.micro_batch_size
        nll = torch.zeros((), dtype=torch.float64, device=device)
        tokens = torch.zeros((), dtype=torch.float64, device=device)
        for i in range(equal_forwards(n_eval, shard[1], micro)):
            idx = list(rows[i * micro: (i + 1) * micro])
            weight = 1.0 if idx else 0.0  # a rank out of rows still joins the forward, weighted 0
            idx = idx or [0]
            x, y = val_x[idx].to(device), val_y[idx].to(device)
            counted = (y != IGNORE).sum()
            with autocast():
                mean = m(x, y)  # the mean over this micro-batch's summary tokens
            nll += mean.double() * counted * weight
            tokens += counted.double() * weight
        return EvalShard(sums={"nll": nll.cpu(), "tokens": tokens.cpu()})

    def score(stats: EvalShard) -> dict[str, float]:
        # the mean over all summary tokens of the set (HF's Trainer averages its per-batch means;
        # with the reference's eval batch of 1 per device that weights each sample equally instead)
        return {METRIC: float(stats.sums["nll"] / stats.sums["tokens"].clamp(min=1))}

    return member_job(
        spec,
        division=division,
        model=model,
        batch=batch,
        loss=lambda m, b: m(*b),
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=spec.flops_per_token() * spec.seq_len,
        optimizer=LoraAdamW(spec),
        eval_schedule=EvalSchedule(every=spec.eval_every_samples, first=spec.eval_first_samples),
        eval_samples=n_eval,
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, n_train),
    )


def log_keys(spec: LoraSpec, train_samples: int) -> dict:
    """The benchmark's own keys, as the reference logs them (train_samples: the training set's size)."""
    return {
        "lora_rank": spec.lora.rank,
        "lora_alpha": spec.lora.alpha,
        "lora_dropout": spec.lora.dropout,
        "max_sequence_length": spec.seq_len,
        "train_samples": train_samples,
    }
