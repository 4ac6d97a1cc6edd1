"""The training loop: steps with gradient accumulation, evaluation at a cadence counted in
samples, stop at the quality target (success) or at a limit (aborted). Everything it does is
written to the MLPerf log; nothing here knows which workload it trains, or how the model is
parallelised (the ParallelContext gives its slice of each batch and the collective decisions)."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.grads import clip_grads_with_norm, grad_norm
from trainclock.mllog import RunLog
from trainclock.train.job import TrainJob
from trainclock.train.progress import TrainProgress


@dataclass(frozen=True)
class TrainOptions:
    device: torch.device
    precision: str = "auto"  # "bf16" (autocast), "fp32", or "auto": bf16 where it is faster (device.peak)
    compile: bool = False
    max_seconds: float | None = None  # wall-clock limit on the timed region
    max_samples: int | None = None  # overrides the workload's limit
    checkpoint_every_steps: int = 0  # with a checkpointer: save every N optimizer steps (0: never)


@dataclass
class LoopState:
    """Everything the loop carries from step to step: what a checkpoint must restore."""

    steps: int = 0
    samples: int = 0
    train_seconds: float = 0.0  # time in training steps (evaluation excluded)
    elapsed_seconds: float = 0.0  # time since run_start, evaluation included (before any restart)
    evals: list[tuple[int, float]] = field(default_factory=list)  # (logged count, metric)
    next_eval: int = 0
    block_first: int = 0
    final_loss: float = math.nan
    status: str = "aborted"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "LoopState":
        state = cls(**data)
        state.evals = [tuple(e) for e in state.evals]
        return state


@dataclass
class TrainOutcome:
    status: str  # "success" or "aborted"
    steps: int
    samples: int
    tokens: int
    train_seconds: float
    evals: list[tuple[int, float]]
    final_loss: float


# Saves a checkpoint of the model, optimizer and loop state.
Checkpoint = Callable[[LoopState], None]


def autocast_context(options: TrainOptions):
    if options.precision not in ("bf16", "fp32"):
        raise ValueError(f"precision {options.precision!r} must be resolved to bf16 or fp32 first (device.peak.resolve_precision)")
    if options.precision == "bf16":
        return lambda: torch.autocast(options.device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def local_micro_batch(job: TrainJob, ctx: ParallelContext) -> int:
    return min(job.micro_batch_size, job.global_batch_size // ctx.dp_size)


def warm_up(job: TrainJob, options: TrainOptions, ctx: ParallelContext) -> None:
    """One forward/backward (and with compile, one evaluation) before the clock starts, so
    compilation and first-touch memory costs land in init, as MLPerf allows. No weights change."""
    autocast = autocast_context(options)
    x, y = job.batch(0)
    rows = ctx.dp_slice(job.global_batch_size)
    micro = local_micro_batch(job, ctx)
    with autocast():
        if hasattr(job.model, "pipeline_step"):  # a pipeline stage runs the whole schedule
            job.model.pipeline_step(x[rows].to(options.device), y[rows].to(options.device))
        else:
            job.model(x[rows][:micro].to(options.device), y[rows][:micro].to(options.device)).backward()
    job.model.zero_grad(set_to_none=True)
    if options.compile:
        job.evaluate(job.model, autocast, (ctx.dp_rank, ctx.dp_size))


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               micro_batch_size: int, clip_norm: float, autocast, device: torch.device,
               ctx: ParallelContext) -> tuple[torch.Tensor, float]:
    """One optimizer step over this rank's rows of a global batch, accumulating gradients over
    micro-batches; data-parallel wrappers average the gradients across ranks. Returns the sum
    of the micro-batch mean losses (not synchronised) and the gradient norm before clipping."""
    if hasattr(model, "pipeline_step"):  # the pipeline schedule does the micro-batches itself
        with autocast():
            loss_sum = model.pipeline_step(x.to(device), y.to(device))
        total = model.grad_square_sum().sqrt()
        clip_grads_with_norm(model.parameters(), clip_norm, total)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss_sum, float(total)
    n_micro = len(x) // micro_batch_size
    loss_sum = torch.zeros((), device=device)
    for m in range(n_micro):
        sl = slice(m * micro_batch_size, (m + 1) * micro_batch_size)
        with ctx.grad_sync(model, enabled=m == n_micro - 1):
            with autocast():
                loss = model(x[sl].to(device, non_blocking=True), y[sl].to(device, non_blocking=True))
            (loss / n_micro).backward()
        loss_sum += loss.detach() / n_micro
    grad_norm = clip_grad_norm(model, clip_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss_sum, float(grad_norm)


def clip_grad_norm(model: torch.nn.Module, max_norm: float) -> torch.Tensor:
    """torch's clip_grad_norm_, for models that mix sharded (DTensor) and plain parameters."""
    params = list(model.parameters())
    total = grad_norm(params)
    clip_grads_with_norm(params, max_norm, total)
    return total


def evaluate(job: TrainJob, autocast, ctx: ParallelContext) -> float:
    """The metric over the whole validation set: each data-parallel rank scores its shard."""
    total, count = job.evaluate(job.model, autocast, (ctx.dp_rank, ctx.dp_size))
    sums = ctx.dp_sum(torch.tensor([total, float(count)], dtype=torch.float64))
    return float(sums[0] / sums[1])


def train(job: TrainJob, optimizer: torch.optim.Optimizer, options: TrainOptions, log: RunLog, metrics: IO[str],
          progress: TrainProgress, ctx: ParallelContext, state: LoopState | None = None,
          checkpoint: Checkpoint | None = None) -> TrainOutcome:
    """The timed region. A fresh run logs run_start; a resumed one continues from `state`."""
    model, device = job.model, options.device
    autocast = autocast_context(options)
    max_samples = options.max_samples or job.max_samples
    rows = ctx.dp_slice(job.global_batch_size)
    micro = local_micro_batch(job, ctx)
    tokens_per_step = job.global_batch_size * job.tokens_per_sample
    block_count = job.log_count(job.eval_every_samples)

    if state is None:
        state = LoopState(next_eval=job.eval_every_samples)
        log.start("run_start")
        log.start("block_start", metadata={"first_epoch_num": 0, "epoch_count": block_count})
    clock_start = time.perf_counter() - state.elapsed_seconds
    while True:
        t0 = time.perf_counter()
        lr = job.optim.lr_at(state.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x_all, y_all = job.batch(state.steps)
        loss_sum, grad_norm = train_step(model, optimizer, x_all[rows], y_all[rows], micro,
                                         job.optim.gradient_clip_norm, autocast, device, ctx)
        loss_value = float(ctx.dp_sum(loss_sum.double().cpu()) / ctx.dp_size)  # synchronises: the time is real
        step_seconds = time.perf_counter() - t0

        state.steps += 1
        state.samples += job.global_batch_size
        state.train_seconds += step_seconds
        state.final_loss = loss_value
        state.elapsed_seconds = time.perf_counter() - clock_start
        count_now = job.log_count(state.samples)
        _write(metrics, {"step": state.steps - 1, "samples": state.samples, "tokens": state.samples * job.tokens_per_sample,
                         "time_s": round(state.elapsed_seconds, 4), "loss": loss_value, "lr": lr,
                         "grad_norm": grad_norm, "tokens_per_s": tokens_per_step / step_seconds})
        if not math.isfinite(loss_value):
            log.event("trainclock_diverged", None, metadata={"epoch_num": count_now})
            break

        reached = False
        if state.samples >= state.next_eval or state.samples >= max_samples:
            log.end("block_stop", metadata={"first_epoch_num": state.block_first})
            log.start("eval_start", metadata={"epoch_num": count_now})
            metric = evaluate(job, autocast, ctx)
            log.event("eval_accuracy", metric, metadata={"epoch_num": count_now})
            log.end("eval_stop", metadata={"epoch_num": count_now})
            state.evals.append((count_now, metric))
            _write(metrics, {"step": state.steps - 1, "samples": state.samples, "tokens": state.samples * job.tokens_per_sample,
                             "time_s": round(time.perf_counter() - clock_start, 4), "eval": metric})
            progress.evaluated(metric)
            reached = metric <= job.target
            while state.next_eval <= state.samples:
                state.next_eval += job.eval_every_samples
            state.block_first = count_now
            state.elapsed_seconds = time.perf_counter() - clock_start
        progress.stepped(state.steps, state.samples, loss_value, tokens_per_step / step_seconds)
        if reached:
            state.status = "success"
            break
        out_of_time = options.max_seconds is not None and state.elapsed_seconds >= options.max_seconds
        if state.samples >= max_samples or ctx.any(out_of_time):
            break
        if state.block_first == count_now:
            log.start("block_start", metadata={"first_epoch_num": state.block_first, "epoch_count": block_count})
        if checkpoint is not None and options.checkpoint_every_steps and state.steps % options.checkpoint_every_steps == 0:
            checkpoint(state)
    if state.block_first != job.log_count(state.samples):
        log.end("block_stop", metadata={"first_epoch_num": state.block_first})
    log.event("train_samples", job.log_count(state.samples))
    log.end("run_stop", metadata={"status": state.status})
    return TrainOutcome(state.status, state.steps, state.samples, state.samples * job.tokens_per_sample,
                        state.train_seconds, state.evals, state.final_loss)


def _write(stream: IO[str], record: dict) -> None:
    stream.write(json.dumps(record) + "\n")
