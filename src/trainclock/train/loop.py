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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO

import torch

from trainclock.distributed.checkpoint import ModelSnapshots
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.grads import clip_grads_with_norm, grad_norm
from trainclock.distributed.pipeline import PipelineModel
from trainclock.mllog import RunLog
from trainclock.train.prefetch import BatchPrefetch, default_depth
from trainclock.train.profile import (BATCH, EVALUATION, FORWARD_BACKWARD, LOGGING, LOSS_SYNC, OPTIMIZER,
                                      NoProfiler, ProfileReport, StepProfiler)
from trainclock.train.progress import TrainProgress
from trainclock.train.scoring import BackgroundScoring, EvalPoint
from trainclock.workloads.base import EvalShard, TrainJob


@dataclass(frozen=True)
class TrainOptions:
    device: torch.device
    precision: str = "auto"  # "bf16" (autocast), "fp32", or "auto": bf16 where it is faster (device.peak)
    max_seconds: float | None = None  # wall-clock limit on the timed region
    max_samples: int | None = None  # overrides the workload's limit
    checkpoint_every_steps: int = 0  # with a checkpointer: save every N optimizer steps (0: never)
    full_curve: bool = False  # reference runs that fix a target: train the whole budget, never stop at one
    profile_steps: int = 0  # with profile_trace: torch.profiler over this many steps (train.profile)
    profile_trace: Path | None = None
    # steps between host reads of the losses (and of the time limit): a read waits for the device to
    # finish, so a GPU's queue runs dry at every one; losses are kept per step on the device meanwhile
    log_every_steps: int = 10
    prefetch_steps: int | None = None  # batches built ahead on a thread (None: prefetch.default_depth of the device)


@dataclass
class LoopState:
    """Everything the loop carries from step to step: what a checkpoint must restore."""

    steps: int = 0
    samples: int = 0
    train_seconds: float = 0.0  # time in training steps (evaluation excluded)
    elapsed_seconds: float = 0.0  # time since run_start, evaluation included (before any restart)
    evals: list[tuple[int | float, dict[str, float]]] = field(default_factory=list)  # (logged count, metrics)
    # offline evaluation: the models saved so far, as (samples, logged count, log time ms, elapsed s)
    snapshots: list[tuple[int, int | float, int, float]] = field(default_factory=list)
    next_eval: int = 0
    block_first: int = 0
    final_loss: float = math.nan
    status: str = "aborted"
    diverged: bool = False

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "LoopState":
        state = cls(**data)
        state.evals = [tuple(e) for e in state.evals]
        state.snapshots = [tuple(s) for s in state.snapshots]
        return state


@dataclass
class TrainOutcome:
    status: str  # "success" or "aborted"
    steps: int
    samples: int
    units: int  # samples in the workload's progress unit (tokens, images, ...)
    train_seconds: float
    evals: list[tuple[int | float, dict[str, float]]]
    final_loss: float
    diverged: bool = False  # a non-finite loss or evaluation ended it: aborted, with no quality to report
    profile: ProfileReport | None = None  # with --profile: where the profiled steps' time went


NO_PROFILER = NoProfiler()

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


def warm_up(job: TrainJob, options: TrainOptions, ctx: ParallelContext, compiled: bool = False) -> None:
    """One forward/backward (and with compile, one evaluation) before the clock starts, so
    compilation and first-touch memory costs land in init, as MLPerf allows. No weights change."""
    autocast = autocast_context(options)
    mine = job.batch(0, ctx.dp_slice(job.global_batch_size))
    with autocast():
        if isinstance(job.model, PipelineModel):  # a pipeline stage runs the whole schedule
            job.model.step(job.batches.to(mine, options.device))
        else:
            first = job.batches.rows(mine, slice(0, local_micro_batch(job, ctx)))
            job.loss(job.model, job.batches.to(first, options.device)).backward()
    job.model.zero_grad(set_to_none=True)
    if compiled:  # the evaluation's shapes compile now too, not inside the timed region
        job.evaluate(job.model, autocast, (ctx.dp_rank, ctx.dp_size))


def train_step(job: TrainJob, optimizer: torch.optim.Optimizer, batch, micro_batch_size: int, autocast,
               device: torch.device, ctx: ParallelContext,
               profiler=NO_PROFILER) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One optimizer step over this rank's rows of a global batch, accumulating gradients over
    micro-batches; data-parallel wrappers average the gradients across ranks. Returns the sum
    of the micro-batch mean losses (not synchronised) and, where the workload clips, the gradient
    norm before clipping: both stay on the device (reading them would wait for the step to end)."""
    model, clip_norm = job.model, job.optimizer.gradient_clip_norm
    total = None
    if isinstance(model, PipelineModel):  # the pipeline schedule does the micro-batches itself
        with profiler.region(FORWARD_BACKWARD), autocast():
            loss_sum = model.step(job.batches.to(batch, device))
        with profiler.region(OPTIMIZER):
            if clip_norm is not None:
                total = model.grad_square_sum().sqrt()
                clip_grads_with_norm(model.parameters(), clip_norm, total)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss_sum, total
    with profiler.region(FORWARD_BACKWARD):
        micro_batches = job.batches.micro_batches(batch, micro_batch_size)
        n_micro = len(micro_batches)
        loss_sum = torch.zeros((), device=device)
        for m, micro in enumerate(micro_batches):
            with ctx.grad_sync(model, enabled=m == n_micro - 1):
                with autocast():
                    loss = job.loss(model, job.batches.to(micro, device))
                (loss / n_micro).backward()
            loss_sum += loss.detach() / n_micro
    with profiler.region(OPTIMIZER):
        if clip_norm is not None:  # clipping scales by min(1, max/norm) on the device: no host read
            params = list(model.parameters())
            total = grad_norm(params)
            clip_grads_with_norm(params, clip_norm, total)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return loss_sum, total


def evaluate(job: TrainJob, autocast, ctx: ParallelContext) -> dict[str, float]:
    """The metrics over the whole validation set: each data-parallel rank scores its shard, the
    statistics are summed (and predictions gathered) across ranks, then the workload scores them."""
    return job.score(predictions(job, autocast, ctx))


def predictions(job: TrainJob, autocast, ctx: ParallelContext) -> EvalShard:
    """The evaluation's statistics over the whole validation set, summed and gathered across ranks."""
    shard = job.evaluate(job.model, autocast, (ctx.dp_rank, ctx.dp_size))
    return EvalShard(sums={k: ctx.dp_sum(v.to(torch.float64)) for k, v in shard.sums.items()},
                     gathered=ctx.dp_gather(shard.gathered))


def _record_eval(job: TrainJob, options: TrainOptions, log: RunLog, metrics: IO[str], progress: TrainProgress,
                 state: LoopState, point: EvalPoint, values: dict[str, float], time_s: float) -> bool:
    """Log and keep one evaluation's values (eval_start is logged); True if they meet the target.
    Non-finite values are no accuracy: the log and the results store must not carry them as one,
    the state is marked diverged instead."""
    count_key = job.progress.log_key
    if not all(math.isfinite(v) for v in values.values()):
        log.end("eval_stop", metadata={count_key: point.count})
        log.event("trainclock_diverged", None, metadata={count_key: point.count, "eval": str(values)})
        state.diverged = True
        return False
    for value, extra in job.eval_accuracy_lines(values):
        log.event("eval_accuracy", value, metadata={count_key: point.count, **extra})
    log.end("eval_stop", metadata={count_key: point.count})
    state.evals.append((point.count, values))
    _write(metrics, {"step": point.step, "samples": point.samples,
                     "units": point.samples * job.progress.units_per_sample, "time_s": time_s, "eval": values})
    progress.evaluated(values)
    return job.reached(values) and not options.full_curve


@dataclass
class _Pending:
    """A step whose loss (and gradient norm) is still on the device, waiting for the next read."""

    step: int
    samples: int
    lr: float
    time_s: float
    loss: torch.Tensor
    grad_norm: torch.Tensor | None


@dataclass
class _Read:
    """The steps of one read: their losses averaged over the data-parallel ranks, as floats."""

    steps: list[_Pending]
    losses: list[float]
    grad_norms: list[float | None]
    seconds: float  # wall time of these steps, up to the end of the read (the device has finished them)

    def first_not_finite(self) -> int | None:
        return next((i for i, loss in enumerate(self.losses) if not math.isfinite(loss)), None)


def _read(pending: list[_Pending], ctx: ParallelContext, started: float) -> _Read:
    """One host read for all pending steps: a single all-reduce of their losses, then one copy."""
    losses = ctx.dp_sum(torch.stack([p.loss for p in pending]).double()) / ctx.dp_size
    norms = [p.grad_norm for p in pending if p.grad_norm is not None]
    values = torch.cat([losses, torch.stack(norms).double()]).tolist() if norms else losses.tolist()
    norm_values = iter(values[len(pending):])
    return _Read(list(pending), values[:len(pending)],
                 [next(norm_values) if p.grad_norm is not None else None for p in pending],
                 time.perf_counter() - started)


def train(job: TrainJob, optimizer: torch.optim.Optimizer, options: TrainOptions, log: RunLog, metrics: IO[str],
          progress: TrainProgress, ctx: ParallelContext, state: LoopState | None = None,
          checkpoint: Checkpoint | None = None, snapshots: ModelSnapshots | None = None) -> TrainOutcome:
    """The timed region. A fresh run logs run_start; a resumed one continues from `state`. A job
    that evaluates offline (EvalSchedule.offline) needs `snapshots` to keep its models in."""
    if job.eval_schedule.offline and snapshots is None:
        raise ValueError(f"{job.name} evaluates offline: pass the run's ModelSnapshots")
    if state is None:
        state = LoopState(next_eval=job.eval_schedule.first_at())
        log.start("run_start")
        log.start("block_start", metadata={"first_epoch_num": 0,
                                           "epoch_count": job.progress.log_count(job.eval_schedule.every)})
    profiler = (StepProfiler(options.profile_steps, options.profile_trace)
                if options.profile_steps and options.profile_trace is not None else NO_PROFILER)
    rows = ctx.dp_slice(job.global_batch_size)
    depth = options.prefetch_steps if options.prefetch_steps is not None else default_depth(options.device, job.cpu_prefetch_steps)
    batches = BatchPrefetch(lambda step: job.batch(step, rows), job.batches, depth,
                            pin=options.device.type == "cuda" and depth > 0)
    scoring = BackgroundScoring(ctx) if job.eval_schedule.background_scoring else None
    try:
        outcome = _train_loop(job, optimizer, options, log, metrics, progress, ctx, state, checkpoint, profiler, batches,
                              snapshots, scoring)
    finally:
        batches.close()
        profiler.close()
        if scoring is not None:
            scoring.close()
    return replace(outcome, profile=profiler.report)


def _train_loop(job: TrainJob, optimizer: torch.optim.Optimizer, options: TrainOptions, log: RunLog, metrics: IO[str],
                progress: TrainProgress, ctx: ParallelContext, state: LoopState, checkpoint: Checkpoint | None,
                profiler, batches: BatchPrefetch, snapshots: ModelSnapshots | None,
                scoring: BackgroundScoring | None) -> TrainOutcome:
    device = options.device
    offline = job.eval_schedule.offline
    autocast = autocast_context(options)
    max_samples = options.max_samples or job.max_samples
    micro = local_micro_batch(job, ctx)
    units_per_step = job.global_batch_size * job.progress.units_per_sample
    count_key = job.progress.log_key
    block_count = job.progress.log_count(job.eval_schedule.every)
    clock_start = time.perf_counter() - state.elapsed_seconds
    pending: list[_Pending] = []
    interval_start = time.perf_counter()
    while True:
        lr = job.optimizer.lr_at(state.steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with profiler.region(BATCH):
            batch = batches.get(state.steps)
        loss_sum, norm = train_step(job, optimizer, batch, micro, autocast, device, ctx, profiler)
        state.steps += 1
        state.samples += job.global_batch_size
        state.elapsed_seconds = time.perf_counter() - clock_start
        pending.append(_Pending(state.steps - 1, state.samples, lr, state.elapsed_seconds, loss_sum, norm))
        evaluating = state.samples >= state.next_eval or state.samples >= max_samples
        checkpointing = (checkpoint is not None and options.checkpoint_every_steps
                         and state.steps % options.checkpoint_every_steps == 0)
        if not (evaluating or checkpointing or len(pending) >= options.log_every_steps):
            profiler.stepped()
            continue  # no host read: the device runs ahead

        with profiler.region(LOSS_SYNC):
            done = _read(pending, ctx, interval_start)  # waits for the device: the time is real
        pending = []
        state.train_seconds += done.seconds
        rate = units_per_step * len(done.steps) / done.seconds
        diverged_at = done.first_not_finite()
        kept = len(done.steps) if diverged_at is None else diverged_at + 1
        with profiler.region(LOGGING):
            for step, loss, grad in zip(done.steps[:kept], done.losses, done.grad_norms):
                _write(metrics, {"step": step.step, "samples": step.samples,
                                 "units": step.samples * job.progress.units_per_sample, "time_s": round(step.time_s, 4),
                                 "loss": loss, "lr": step.lr, **({"grad_norm": grad} if grad is not None else {}),
                                 "units_per_s": rate})
        state.final_loss = done.losses[kept - 1]
        if diverged_at is not None:
            log.event("trainclock_diverged", None,
                      metadata={count_key: job.progress.log_count(done.steps[diverged_at].samples)})
            state.diverged = True
            break

        count_now = job.progress.log_count(state.samples)
        point = EvalPoint(state.steps - 1, state.samples, count_now)
        reached = False
        if scoring is not None and scoring.pending:  # taken before another evaluation or a checkpoint starts
            with profiler.region(EVALUATION):
                arrived = scoring.take(wait=evaluating or checkpointing)
            if arrived is not None:
                reached = _record_eval(job, options, log, metrics, progress, state, *arrived,
                                       round(time.perf_counter() - clock_start, 4))
                if state.diverged:
                    break
                evaluating = evaluating and not reached
        if evaluating and offline:  # the model is kept for later; training goes on to its limit
            log.end("block_stop", metadata={"first_epoch_num": state.block_first})
            snapshots.save(job.model, state.samples)
            state.snapshots.append((state.samples, count_now, int(time.time() * 1000),
                                    round(time.perf_counter() - clock_start, 4)))
            state.next_eval = job.eval_schedule.next_after(state.samples, state.next_eval)
            state.block_first = count_now
            state.elapsed_seconds = time.perf_counter() - clock_start
        elif evaluating:
            log.end("block_stop", metadata={"first_epoch_num": state.block_first})
            log.start("eval_start", metadata={count_key: count_now})
            with profiler.region(EVALUATION):
                reduced = predictions(job, autocast, ctx)
                values = job.score(reduced) if scoring is None else None
            if scoring is not None:  # training goes on while rank 0 scores
                scoring.submit(job.score, reduced, point)
            else:
                reached = _record_eval(job, options, log, metrics, progress, state, point, values,
                                       round(time.perf_counter() - clock_start, 4))
                if state.diverged:
                    state.block_first = count_now  # the block ended before the evaluation
                    break
            state.next_eval = job.eval_schedule.next_after(state.samples, state.next_eval)
            state.block_first = count_now
            state.elapsed_seconds = time.perf_counter() - clock_start
        with profiler.region(LOGGING):
            progress.stepped(state.steps, state.samples, state.final_loss, rate)
        profiler.stepped()
        if reached:
            state.status = "success"
            break
        out_of_time = options.max_seconds is not None and state.elapsed_seconds >= options.max_seconds
        if state.samples >= max_samples or ctx.any(out_of_time):
            break
        if state.block_first == count_now:
            log.start("block_start", metadata={"first_epoch_num": state.block_first, "epoch_count": block_count})
        if checkpointing:
            checkpoint(state)
        interval_start = time.perf_counter()  # evaluation, logging and checkpoints are not training time
    if scoring is not None and scoring.pending and not state.diverged:  # the last evaluation may still pass
        point, values = scoring.take(wait=True)
        if _record_eval(job, options, log, metrics, progress, state, point, values,
                        round(time.perf_counter() - clock_start, 4)):
            state.status = "success"
    if state.block_first != job.progress.log_count(state.samples):
        log.end("block_stop", metadata={"first_epoch_num": state.block_first})
    if "train_samples" not in job.log_keys:  # some rules want the training set's size, logged at init by the job
        log.event("train_samples", job.progress.log_count(state.samples))
    stop_ms = None
    if offline and not state.diverged:
        stop_ms = _score_snapshots(job, options, log, metrics, progress, ctx, state, snapshots, autocast, profiler)
        snapshots.clear()
    # an offline run ends when its first passing model was saved, as the submissions' logs do
    log.end("run_stop", metadata={"status": state.status}, time_ms=stop_ms)
    return TrainOutcome(state.status, state.steps, state.samples, state.samples * job.progress.units_per_sample,
                        state.train_seconds, state.evals, state.final_loss, state.diverged)


def _score_snapshots(job: TrainJob, options: TrainOptions, log: RunLog, metrics: IO[str], progress: TrainProgress,
                     ctx: ParallelContext, state: LoopState, snapshots: ModelSnapshots, autocast,
                     profiler) -> int | None:
    """After training, the saved models in order, each scored and logged as an inline evaluation
    would be (its eval lines carry the real time of scoring); the log time at which the first to
    meet the target was saved, or None. Sets the state's status, evals and divergence."""
    count_key = job.progress.log_key
    for samples, count, saved_ms, elapsed_s in state.snapshots:
        log.start("eval_start", metadata={count_key: count})
        snapshots.load(job.model, samples)
        with profiler.region(EVALUATION):
            values = evaluate(job, autocast, ctx)
        point = EvalPoint(samples // job.global_batch_size - 1, samples, count)
        if _record_eval(job, options, log, metrics, progress, state, point, values, elapsed_s):
            state.status = "success"
            return saved_ms
        if state.diverged:
            return None
    return None


def _write(stream: IO[str], record: dict) -> None:
    stream.write(json.dumps(record) + "\n")
