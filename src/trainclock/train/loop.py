"""The training loop: steps with gradient accumulation, evaluation at a cadence counted in
samples, stop at the quality target (success) or at a limit (aborted). Everything it does is
written to the MLPerf log; nothing here knows which workload it trains."""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import torch

from trainclock.mllog import RunLog
from trainclock.train.job import TrainJob
from trainclock.train.optim import build_optimizer
from trainclock.train.progress import TrainProgress


@dataclass(frozen=True)
class TrainOptions:
    device: torch.device
    precision: str = "bf16"  # "bf16" (autocast) or "fp32"
    compile: bool = False
    max_seconds: float | None = None  # wall-clock limit on the timed region
    max_samples: int | None = None  # overrides the workload's limit


@dataclass
class TrainOutcome:
    status: str  # "success" or "aborted"
    steps: int
    samples: int
    tokens: int
    train_seconds: float  # time in training steps (evaluation excluded)
    evals: list[tuple[int, float]]  # (tokens trained, metric)
    final_loss: float


def autocast_context(options: TrainOptions):
    if options.precision == "bf16":
        return lambda: torch.autocast(options.device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


def warm_up(job: TrainJob, options: TrainOptions) -> None:
    """Run one forward/backward and one evaluation-sized forward before the clock starts, so
    compilation and first-touch memory costs land in init, as MLPerf allows. No weights change."""
    autocast = autocast_context(options)
    x, y = job.batch(0)
    with autocast():
        loss = job.model(x[: job.micro_batch_size].to(options.device), y[: job.micro_batch_size].to(options.device))
    loss.backward()
    job.model.zero_grad(set_to_none=True)
    if options.device.type == "cuda":
        torch.cuda.synchronize(options.device)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, x_all: torch.Tensor, y_all: torch.Tensor,
               micro_batch_size: int, clip_norm: float, autocast, device: torch.device) -> tuple[float, float]:
    """One optimizer step over a global batch, accumulating gradients over micro-batches.
    Returns the mean loss and the gradient norm before clipping (both synchronised)."""
    n_micro = len(x_all) // micro_batch_size
    loss_sum = torch.zeros((), device=device)
    for m in range(n_micro):
        sl = slice(m * micro_batch_size, (m + 1) * micro_batch_size)
        with autocast():
            loss = model(x_all[sl].to(device, non_blocking=True), y_all[sl].to(device, non_blocking=True))
        (loss / n_micro).backward()
        loss_sum += loss.detach()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return (loss_sum / n_micro).item(), float(grad_norm)


def train(job: TrainJob, options: TrainOptions, log: RunLog, metrics: IO[str], progress: TrainProgress) -> TrainOutcome:
    """The timed region: from run_start to run_stop."""
    model, device = job.model, options.device
    optimizer = build_optimizer(model, job.optim)
    autocast = autocast_context(options)
    max_samples = options.max_samples or job.max_samples
    tokens_per_step = job.global_batch_size * job.tokens_per_sample

    outcome = TrainOutcome("aborted", 0, 0, 0, 0.0, [], math.nan)
    log.start("run_start")
    run_start = time.perf_counter()
    block_count = job.log_count(job.eval_every_samples)
    log.start("block_start", metadata={"first_epoch_num": 0, "epoch_count": block_count})
    block_first = 0
    next_eval = job.eval_every_samples
    while True:
        step = outcome.steps
        t0 = time.perf_counter()
        lr = job.optim.lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x_all, y_all = job.batch(step)
        loss_value, grad_norm = train_step(model, optimizer, x_all, y_all, job.micro_batch_size,
                                           job.optim.gradient_clip_norm, autocast, device)
        step_seconds = time.perf_counter() - t0

        outcome.steps += 1
        outcome.samples += job.global_batch_size
        outcome.tokens += tokens_per_step
        outcome.train_seconds += step_seconds
        outcome.final_loss = loss_value
        elapsed = time.perf_counter() - run_start
        _write(metrics, {"step": step, "samples": outcome.samples, "tokens": outcome.tokens, "time_s": round(elapsed, 4),
                         "loss": loss_value, "lr": lr, "grad_norm": grad_norm,
                         "tokens_per_s": tokens_per_step / step_seconds})
        if not math.isfinite(loss_value):
            log.event("trainclock_diverged", loss_value, metadata={"epoch_num": outcome.tokens})
            break

        reached = False
        if outcome.samples >= next_eval or outcome.samples >= max_samples:
            tokens_now = job.log_count(outcome.samples)
            log.end("block_stop", metadata={"first_epoch_num": block_first})
            log.start("eval_start", metadata={"epoch_num": tokens_now})
            metric = job.evaluate(model, autocast)
            log.event("eval_accuracy", metric, metadata={"epoch_num": tokens_now})
            log.end("eval_stop", metadata={"epoch_num": tokens_now})
            outcome.evals.append((tokens_now, metric))
            _write(metrics, {"step": step, "samples": outcome.samples, "tokens": tokens_now,
                             "time_s": round(time.perf_counter() - run_start, 4), "eval": metric})
            progress.evaluated(metric)
            reached = metric <= job.target
            while next_eval <= outcome.samples:
                next_eval += job.eval_every_samples
            block_first = tokens_now
        progress.stepped(outcome.steps, outcome.samples, loss_value, tokens_per_step / step_seconds)
        if reached:
            outcome.status = "success"
            break
        if outcome.samples >= max_samples:
            break
        if options.max_seconds is not None and time.perf_counter() - run_start >= options.max_seconds:
            break
        if block_first == job.log_count(outcome.samples):
            log.start("block_start", metadata={"first_epoch_num": block_first, "epoch_count": block_count})
    if block_first != job.log_count(outcome.samples):
        log.end("block_stop", metadata={"first_epoch_num": block_first})
    log.event("train_samples", job.log_count(outcome.samples))
    log.end("run_stop", metadata={"status": outcome.status})
    return outcome


def _write(stream: IO[str], record: dict) -> None:
    stream.write(json.dumps(record) + "\n")
