"""The BERT benchmark as a workload: its members, the checks a run must pass, and the job the
generic loop trains (data, start checkpoint, model, masked-LM accuracy, LAMB, MLPerf log keys)."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import build_parallelized
from trainclock.errors import UsageError
from trainclock.storage import discard_folder
from trainclock.optim.lamb import Lamb, PolyWarmup
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.spec_base import division
from trainclock.workload.batches import TreeBatch
from trainclock.workloads.bert.data.batches import (PackedBatches, as_tensors, model_inputs, packed_rows_per_sequence,
                                                    packed_train_batch, train_batch)
from trainclock.workloads.bert.data.official import load_folder
from trainclock.workloads.bert.data.prepare import Layout as DataLayout
from trainclock.workloads.bert.data.prepare import prepare
from trainclock.workloads.bert.data.text import parse_source
from trainclock.workloads.bert.metric import mlm_sums, score
from trainclock.workloads.bert.parallelize import PARALLELISM
from trainclock.workloads.bert.spec import MEMBERS, MLPERF_ROUND, BertSpec, get_member
from trainclock.workloads.bert.cost import run_progress

INIT_CHECKPOINT_ENV = "TRAINCLOCK_BERT_INIT_CHECKPOINT"
RULES_DATASET = "wikipedia"


class BertWorkload(BenchmarkWorkload):
    key = "bert"
    full_size_flags = "--data DIR --init-checkpoint phase1.pt"
    mlperf_round = MLPERF_ROUND
    title = "BERT"
    specs = MEMBERS
    batch_units = "sequences"

    def parameter_count(self, spec: BertSpec) -> int:
        return spec.shape.parameter_count()

    def describe(self, spec: BertSpec) -> str:
        s = spec.shape
        return f"{s.n_layer} layers, width {s.hidden}, {s.n_head} heads, seq {spec.seq_len}"

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--init-checkpoint", metavar="PATH",
                           help=f"start weights: a torch state dict by parameter name (bert-large needs the reference "
                                f"phase-1 checkpoint; also ${INIT_CHECKPOINT_ENV})")
        group.add_argument("--pack-sequences", action=argparse.BooleanOptionalAction, default=None,
                           help="train on packed rows, several sequences a row: each step's sequences are the "
                                "same, in fewer tokens (default: on for bert-large, off for the CPU tiers)")

    def configure(self, spec: BertSpec, settings: RunSettings, layout: Layout, device: torch.device) -> BertSpec:
        if settings.extra.get("pack_sequences") is not None:
            spec = replace(spec, pack_sequences=settings.extra["pack_sequences"])
        return spec

    def check_run(self, spec: BertSpec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        if spec.corpus == RULES_DATASET and device.type != "meta":  # a dry run, on meta, reads no data
            check_start_checkpoint(settings)
            if settings.data is None:
                load_folder(None, spec.seq_len, spec.max_predictions)

    def build_job(self, spec: BertSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        return build_job(spec, settings, seed, ctx, device)

    def build_model(self, spec: BertSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        return build_model(spec, ctx, device, settings)

    def optimizer(self, spec: BertSpec) -> Lamb:
        return optimizer(spec)

    def sample_loss(self, spec: BertSpec, model: torch.nn.Module, rows: int, device: torch.device) -> torch.Tensor:
        predictions = spec.max_predictions
        batch = {"input_ids": torch.randint(0, spec.shape.vocab_size, (rows, spec.seq_len), device=device),
                 "segment_ids": torch.zeros(rows, spec.seq_len, dtype=torch.long, device=device),
                 "input_mask": torch.ones(rows, spec.seq_len, dtype=torch.long, device=device),
                 "masked_lm_positions": torch.randint(0, spec.seq_len, (rows, predictions), device=device),
                 "masked_lm_ids": torch.randint(0, spec.shape.vocab_size, (rows, predictions), device=device),
                 "masked_lm_weights": torch.ones(rows, predictions, device=device),
                 "next_sentence_labels": torch.zeros(rows, dtype=torch.long, device=device)}
        return model(**batch)[0]

    def fetch_data(self) -> str | None:
        return None  # the tiers read the corpus the GPT-3 tier fetches into the shared data home

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member)
        if spec.corpus == "wikipedia":
            train, evaluation = load_folder(data, spec.seq_len, spec.max_predictions, spec.shape.vocab_size)
            return f"{len(train['input_ids']):,} train and {len(evaluation['input_ids']):,} eval instances in {data}"
        prepared = prepare(parse_source(data or spec.corpus), data_layout(spec), force=force)
        checkpoint = start_checkpoint(spec, prepared, as_tensors(prepared.train))
        return (f"{len(prepared.train['input_ids']):,} train and {len(prepared.eval['input_ids']):,} eval instances "
                f"(WordPiece vocabulary {prepared.vocab_size}) and the phase-1 checkpoint {checkpoint.name} "
                f"in {prepared.folder}")

    def cost(self, member: str):
        from trainclock.workloads.bert.cost import cost_model

        return cost_model(member)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        from trainclock.workloads.bert.data.sample import write_sample  # h5py: only when asked

        return write_sample(get_member(member), folder, samples, seed)


def data_layout(spec: BertSpec) -> DataLayout:
    return DataLayout(spec.shape.vocab_size, spec.seq_len, spec.max_predictions, spec.train_instances, spec.eval_samples)


def start_checkpoint(spec: BertSpec, prepared, train: dict[str, torch.Tensor]) -> Path:
    """The tier's phase-1 checkpoint beside its prepared data, made there once. Where making it fails,
    the prepared folder goes with it: a cache that failed is never kept for the next run to fail on."""
    from trainclock.workloads.bert.phase1 import make_phase1, phase1_path

    try:
        return make_phase1(spec, train, phase1_path(prepared.folder, spec))
    except Exception:  # an interrupt leaves a sound cache: only a failure removes it
        discard_folder(prepared.folder)
        raise


def init_checkpoint(settings: RunSettings) -> Path | None:
    path = settings.extra.get("init_checkpoint") or os.environ.get(INIT_CHECKPOINT_ENV)
    return Path(path).expanduser() if path else None


def check_start_checkpoint(settings: RunSettings) -> Path:
    start = init_checkpoint(settings)
    if start is None:
        raise UsageError(f"bert-large starts from the reference phase-1 checkpoint: pass --init-checkpoint PATH "
                         f"(or set ${INIT_CHECKPOINT_ENV}); it cannot be downloaded at run time")
    if not start.is_file():
        raise UsageError(f"start checkpoint {start} does not exist; give the path of the reference phase-1 "
                         "checkpoint as a PyTorch state dict")
    return start


def load_data(spec: BertSpec, settings: RunSettings, ctx: ParallelContext,
              device: torch.device) -> tuple[dict, dict, str, Path | None]:
    """(train, eval) tensors, the dataset's name and the start checkpoint (made for a CPU tier). A meta
    device (a dry run, a host-pipeline measurement) loads no weights, so it needs and makes none."""
    on_meta = device.type == "meta"
    start = init_checkpoint(settings)
    if spec.corpus == "wikipedia":
        start = None if on_meta else check_start_checkpoint(settings)
        train, evaluation = load_folder(settings.data, spec.seq_len, spec.max_predictions, spec.shape.vocab_size)
        return as_tensors(train), as_tensors(evaluation), "wikipedia", start

    def prepare_tier():
        prepared = prepare(parse_source(settings.data or spec.corpus), data_layout(spec))
        train = as_tensors(prepared.train)
        made = start if start or on_meta else start_checkpoint(spec, prepared, train)
        return prepared, train, made

    prepared, train, start = ctx.main_first(prepare_tier)  # one rank tokenizes and pre-trains
    name = "shakespeare" if settings.data is None and spec.corpus == "shakespeare" else "text"
    return train, as_tensors(prepared.eval), name, start


def build_job(spec: BertSpec, settings: RunSettings, seed: int, ctx: ParallelContext,
              device: torch.device) -> TrainJob:
    train, evaluation, dataset, start = load_data(spec, settings, ctx, device)
    torch.manual_seed(seed)
    model = build_model(spec, ctx, device, settings, start)
    eval_micro = spec.micro_batch_size

    def evaluate(m: torch.nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        return mlm_sums(m, evaluation, eval_micro, shard, autocast, device)

    def batch(step: int, rows: slice):
        if spec.pack_sequences:  # micro-batches as the loop cuts a rank's rows: min(micro, rows per rank)
            return packed_train_batch(train, seed, step, spec.global_batch_size, rows, spec.micro_batch_size,
                                      spec.seq_len, spec.max_predictions)
        return train_batch(train, seed, step, spec.global_batch_size, rows)

    # packed, a sequence costs its share of a row (about 0.54 at 512 on Wikipedia), so MFU counts what is computed
    rows_per_sequence = (packed_rows_per_sequence(train, seed, spec.global_batch_size, spec.micro_batch_size,
                                                  spec.seq_len, spec.max_predictions)
                         if spec.pack_sequences and len(train["input_ids"]) else 1.0)
    return bert_job(spec, model, batch, evaluate, dataset=dataset, eval_samples=len(evaluation["input_ids"]),
                    rows_per_sequence=rows_per_sequence)


def build_model(spec: BertSpec, ctx: ParallelContext, device: torch.device, settings: RunSettings,
                start: Path | None = None) -> torch.nn.Module:
    """BERT as this rank trains it, from the `start` checkpoint where given. Built whole (336M
    parameters at most), except for a meta device (a dry run), where it is built and cut on meta."""
    from trainclock.workloads.bert.model import build_model as pretraining_model  # transformers: seconds to import
    from trainclock.workloads.bert.model import load_start_checkpoint

    def make() -> torch.nn.Module:
        model = pretraining_model(spec.shape, spec.dropout)
        if start is not None and device.type != "meta":  # a dry run reads nothing
            load_start_checkpoint(model, start)
        return model

    return build_parallelized(make, device, ctx, PARALLELISM, compile=settings.compile,
                              activation_checkpointing=settings.activation_checkpointing)


def bert_job(spec: BertSpec, model: torch.nn.Module, batch, evaluate, dataset: str, eval_samples: int,
             rows_per_sequence: float = 1.0) -> TrainJob:
    """The job around a built model; tests build one with a stand-in model to write logs.
    `rows_per_sequence`: the rows of seq_len tokens computed per sequence (below 1 when packed)."""
    return member_job(
        spec,
        division=division(spec, dataset, RULES_DATASET),
        model=model,
        batch=batch,
        loss=lambda m, b: m(**model_inputs(b))[0],
        evaluate=evaluate,
        score=score,
        progress=run_progress(spec),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=spec.shape.flops_per_sample(spec.seq_len, spec.max_predictions) * rows_per_sequence,
        optimizer=optimizer(spec),
        eval_schedule=EvalSchedule(every=spec.eval_every_samples),
        eval_samples=eval_samples,
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, dataset),
        batches=PackedBatches() if spec.pack_sequences else TreeBatch(),
    )


def optimizer(spec: BertSpec) -> Lamb:
    return Lamb(PolyWarmup(spec.learning_rate, spec.training_steps, spec.warmup_steps, spec.start_warmup_step),
                beta1=spec.beta1, beta2=spec.beta2, eps=spec.eps, weight_decay=spec.weight_decay)


def log_keys(spec: BertSpec, dataset: str) -> dict:
    """The benchmark-specific keys, as the official bert logs carry them."""
    return {
        "max_sequence_length": spec.seq_len,
        "max_predictions_per_seq": spec.max_predictions,
        "num_layers": spec.shape.n_layer,
        "hidden_size": spec.shape.hidden,
        "vocab_size": spec.shape.vocab_size,
        "dataset": dataset,
    }
