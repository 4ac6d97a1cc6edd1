"""The training loop: steps with gradient accumulation, evaluation at a cadence counted in
samples, stop at the quality target (success) or at a limit (aborted). Everything it does is
written to the MLPerf log; nothing here knows which workload it trains, or how the model is
parallelised (the ParallelContext gives its slice of each batch and the collective decisions)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import IO

import torch

from trainclock.distributed.checkpoint import ModelSnapshots
from trainclock.distributed.context import ParallelContext
from trainclock.mllog import RunLog
from trainclock.train.options import TrainOptions
from trainclock.train.prefetch import BatchPrefetch, default_depth
from trainclock.train.profile import BATCH, EVALUATION, LOGGING, LOSS_SYNC, ProfileReport, StepProfiler
from trainclock.train.progress import TrainProgress
from trainclock.train.scoring import BackgroundScoring, EvalPoint
from trainclock.train.step import NO_PROFILER, autocast_context, evaluate, local_micro_batch, predictions, train_step
from trainclock.workload.base import TrainJob


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
    # a success: the samples of the model that met the target, fewer than `samples` where evaluation is
    # offline (training goes on to its limit; the first passing snapshot ends the run)
    reached_samples: int | None = None


# Saves a checkpoint of the model, optimizer and loop state.
Checkpoint = Callable[[LoopState], None]


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
                                           "epoch_count": job.progress.codec.count(job.eval_schedule.every)})
    profiler = (StepProfiler(options.profile_steps, options.profile_trace)
                if options.profile_steps and options.profile_trace is not None else NO_PROFILER)
    rows = ctx.dp_slice(job.global_batch_size)
    depth = options.prefetch_steps if options.prefetch_steps is not None else default_depth(options.device, job.cpu_prefetch_steps)
    batches = BatchPrefetch(lambda step: job.batch(step, rows), job.batches, depth,
                            pin=options.device.type == "cuda" and depth > 0)
    scoring = BackgroundScoring(ctx) if job.eval_schedule.background_scoring else None
    try:
        outcome = Trainer(job, optimizer, options, log, metrics, progress, ctx, state, checkpoint, profiler, batches,
                          snapshots, scoring).run()
    finally:
        batches.close()
        profiler.close()
        if scoring is not None:
            scoring.close()
    return replace(outcome, profile=profiler.report)


class Trainer:
    """The timed region's decisions, one method each: a step, reading the losses back, an
    evaluation (inline, scored in the background, or a model kept for offline scoring), the stop
    and the checkpoint. `run` only orders them; the state they share is the LoopState a checkpoint
    restores, and the log and metrics file they write."""

    def __init__(self, job: TrainJob, optimizer: torch.optim.Optimizer, options: TrainOptions, log: RunLog,
                 metrics: IO[str], progress: TrainProgress, ctx: ParallelContext, state: LoopState,
                 checkpoint: Checkpoint | None, profiler, batches: BatchPrefetch, snapshots: ModelSnapshots | None,
                 scoring: BackgroundScoring | None) -> None:
        self.job, self.optimizer, self.options, self.log, self.metrics = job, optimizer, options, log, metrics
        self.progress, self.ctx, self.state, self.checkpoint = progress, ctx, state, checkpoint
        self.profiler, self.batches, self.snapshots, self.scoring = profiler, batches, snapshots, scoring
        self.autocast = autocast_context(options)
        self.max_samples = options.max_samples or job.max_samples
        self.micro = local_micro_batch(job, ctx)
        self.count_key = job.progress.log_key
        self.codec = job.progress.codec  # how the log counts progress (mllog.progress)
        self.clock_start = time.perf_counter() - state.elapsed_seconds
        self.pending: list[_Pending] = []

    def run(self) -> TrainOutcome:
        state, profiler = self.state, self.profiler
        interval_start = time.perf_counter()
        while True:
            self.step()
            evaluating = state.samples >= state.next_eval or state.samples >= self.max_samples
            checkpointing = (self.checkpoint is not None and self.options.checkpoint_every_steps
                             and state.steps % self.options.checkpoint_every_steps == 0)
            if not (evaluating or checkpointing or len(self.pending) >= self.options.log_every_steps):
                profiler.stepped()
                continue  # no host read: the device runs ahead
            rate = self.read_losses(interval_start)
            if state.diverged:
                break
            count_now = self.codec.count(state.samples)
            point = EvalPoint(state.steps - 1, state.samples, count_now)
            reached = False
            if self.scoring is not None and self.scoring.pending:  # taken before another evaluation or a checkpoint
                reached = self.take_background_score(wait=evaluating or checkpointing)
                if state.diverged:
                    break
                evaluating = evaluating and not reached
            if evaluating and self.job.eval_schedule.offline:
                self.keep_for_offline_scoring(count_now)
            elif evaluating:
                reached = self.evaluate(point)
                if state.diverged:
                    state.block_first = count_now  # the block ended before the evaluation
                    break
                self.end_evaluation(count_now)
            with profiler.region(LOGGING):
                self.progress.stepped(state.steps, state.samples, state.final_loss, rate)
            profiler.stepped()
            if reached:
                state.status = "success"
                break
            if self.out_of_budget():
                break
            if state.block_first == count_now:
                self.log.start("block_start", metadata={"first_epoch_num": state.block_first,
                                                        "epoch_count": self.codec.count(self.job.eval_schedule.every)})
            if checkpointing:
                self.checkpoint(state)
            interval_start = time.perf_counter()  # evaluation, logging and checkpoints are not training time
        return self.finish()

    def step(self) -> None:
        """One optimizer step at the schedule's learning rate; its loss stays on the device."""
        job, state = self.job, self.state
        lr = job.optimizer.lr_at(state.steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with self.profiler.region(BATCH):
            batch = self.batches.get(state.steps)
        loss_sum, norm = train_step(job, self.optimizer, batch, self.micro, self.autocast, self.options.device,
                                    self.ctx, self.profiler)
        state.steps += 1
        state.samples += job.global_batch_size
        state.elapsed_seconds = self.elapsed()
        self.pending.append(_Pending(state.steps - 1, state.samples, lr, state.elapsed_seconds, loss_sum, norm))

    def read_losses(self, interval_start: float) -> float:
        """The pending steps' losses read back in one go and written to the metrics file; the
        training rate over them (units/s). A non-finite loss ends the run as diverged."""
        job, state = self.job, self.state
        with self.profiler.region(LOSS_SYNC):
            done = _read(self.pending, self.ctx, interval_start)  # waits for the device: the time is real
        self.pending = []
        state.train_seconds += done.seconds
        rate = self.codec.units_in(job.global_batch_size * len(done.steps)) / done.seconds
        diverged_at = done.first_not_finite()
        kept = len(done.steps) if diverged_at is None else diverged_at + 1
        with self.profiler.region(LOGGING):
            for step, loss, grad in zip(done.steps[:kept], done.losses, done.grad_norms):
                _write(self.metrics, {"step": step.step, "samples": step.samples,
                                      "units": self.codec.units_in(step.samples),
                                      "time_s": round(step.time_s, 4), "loss": loss, "lr": step.lr,
                                      **({"grad_norm": grad} if grad is not None else {}), "units_per_s": rate})
        state.final_loss = done.losses[kept - 1]
        if diverged_at is not None:
            self.log.event("trainclock_diverged", None,
                           metadata={self.count_key: self.codec.count(done.steps[diverged_at].samples)})
            state.diverged = True
        return rate

    def take_background_score(self, wait: bool) -> bool:
        """The background evaluation's values, recorded if they have arrived (waiting for them when
        `wait`); True if they meet the target."""
        with self.profiler.region(EVALUATION):
            arrived = self.scoring.take(wait=wait)
        return arrived is not None and self.record_eval(*arrived, self.elapsed_rounded())

    def keep_for_offline_scoring(self, count_now: int | float) -> None:
        """Offline evaluation: the model is saved for scoring after training, which goes on to its limit."""
        state = self.state
        self.log.end("block_stop", metadata={"first_epoch_num": state.block_first})
        self.snapshots.save(self.job.model, state.samples)
        state.snapshots.append((state.samples, count_now, int(time.time() * 1000), self.elapsed_rounded()))
        self.end_evaluation(count_now)

    def evaluate(self, point: EvalPoint) -> bool:
        """An evaluation now: scored here, or handed to the background scorer while training goes
        on; True if scored here and the target is met."""
        self.log.end("block_stop", metadata={"first_epoch_num": self.state.block_first})
        self.log.start("eval_start", metadata={self.count_key: point.count})
        with self.profiler.region(EVALUATION):
            reduced = predictions(self.job, self.autocast, self.ctx)
            values = self.job.score(reduced) if self.scoring is None else None
        if self.scoring is not None:  # rank 0 scores while training goes on
            self.scoring.submit(self.job.score, reduced, point)
            return False
        return self.record_eval(point, values, self.elapsed_rounded())

    def end_evaluation(self, count_now: int | float) -> None:
        """The next evaluation's point, and a new block from here."""
        state = self.state
        state.next_eval = self.job.eval_schedule.next_after(state.samples, state.next_eval)
        state.block_first = count_now
        state.elapsed_seconds = self.elapsed()

    def out_of_budget(self) -> bool:
        """The sample limit, or the time limit (agreed by every rank: one stops, all stop)."""
        state = self.state
        out_of_time = self.options.max_seconds is not None and state.elapsed_seconds >= self.options.max_seconds
        return state.samples >= self.max_samples or self.ctx.any(out_of_time)

    def record_eval(self, point: EvalPoint, values: dict[str, float], time_s: float) -> bool:
        """Log and keep one evaluation's values (eval_start is logged); True if they meet the target.
        Non-finite values are no accuracy: the log and the results store must not carry them as one,
        the state is marked diverged instead."""
        job, state, log = self.job, self.state, self.log
        if not all(math.isfinite(v) for v in values.values()):
            log.end("eval_stop", metadata={self.count_key: point.count})
            log.event("trainclock_diverged", None, metadata={self.count_key: point.count, "eval": str(values)})
            state.diverged = True
            return False
        for value, extra in job.eval_accuracy_lines(values):
            log.event("eval_accuracy", value, metadata={self.count_key: point.count, **extra})
        log.end("eval_stop", metadata={self.count_key: point.count})
        state.evals.append((point.count, values))
        _write(self.metrics, {"step": point.step, "samples": point.samples,
                              "units": self.codec.units_in(point.samples), "time_s": time_s,
                              "eval": values})
        self.progress.evaluated(values)
        return job.reached(values) and not self.options.full_curve

    def finish(self) -> TrainOutcome:
        """The last background score, the open block, offline scoring, and run_stop."""
        job, state, log = self.job, self.state, self.log
        if self.scoring is not None and self.scoring.pending and not state.diverged:  # it may still pass
            if self.record_eval(*self.scoring.take(wait=True), self.elapsed_rounded()):
                state.status = "success"
        if state.block_first != self.codec.count(state.samples):
            log.end("block_stop", metadata={"first_epoch_num": state.block_first})
        if "train_samples" not in job.log_keys:  # some rules want the training set's size, logged at init by the job
            log.event("train_samples", self.codec.count(state.samples))
        stop_ms, reached = None, state.samples
        if job.eval_schedule.offline and not state.diverged:
            stop_ms, reached = self.score_snapshots()
            self.snapshots.clear()
        # an offline run ends when its first passing model was saved, as the submissions' logs do
        log.end("run_stop", metadata={"status": state.status}, time_ms=stop_ms)
        return TrainOutcome(state.status, state.steps, state.samples, self.codec.units_in(state.samples),
                            state.train_seconds, state.evals, state.final_loss, state.diverged,
                            reached_samples=reached if state.status == "success" else None)

    def score_snapshots(self) -> tuple[int | None, int | None]:
        """After training, the saved models in order, each scored and logged as an inline evaluation
        would be (its eval lines carry the real time of scoring); the log time at which the first to
        meet the target was saved and its samples, or Nones. Sets the state's status, evals and divergence."""
        job, state = self.job, self.state
        for samples, count, saved_ms, elapsed_s in state.snapshots:
            self.log.start("eval_start", metadata={self.count_key: count})
            self.snapshots.load(job.model, samples)
            with self.profiler.region(EVALUATION):
                values = evaluate(job, self.autocast, self.ctx)
            point = EvalPoint(samples // job.global_batch_size - 1, samples, count)
            if self.record_eval(point, values, elapsed_s):
                state.status = "success"
                return saved_ms, samples
            if state.diverged:
                return None, None
        return None, None

    def elapsed(self) -> float:
        return time.perf_counter() - self.clock_start

    def elapsed_rounded(self) -> float:
        return round(self.elapsed(), 4)


def _write(stream: IO[str], record: dict) -> None:
    stream.write(json.dumps(record) + "\n")
