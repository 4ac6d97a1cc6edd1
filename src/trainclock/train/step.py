"""One optimizer step and one evaluation, as the loop (train.loop) and the speed scripts run
them: gradient accumulation over micro-batches, data-parallel gradient sync on the last one,
clipping and the optimizer, all without reading anything back to the host."""

from __future__ import annotations

import contextlib

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.grads import clip_grads_with_norm, grad_norm
from trainclock.distributed.pipeline import PipelineModel
from trainclock.train.options import TrainOptions
from trainclock.train.profile import FORWARD_BACKWARD, OPTIMIZER, NoProfiler
from trainclock.workload.base import EvalShard, TrainJob
from trainclock.workload.evaluation import evaluating

NO_PROFILER = NoProfiler()


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
        evaluate_shard(job, autocast, (ctx.dp_rank, ctx.dp_size))


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
    shard = evaluate_shard(job, autocast, (ctx.dp_rank, ctx.dp_size))
    return EvalShard(sums={k: ctx.dp_sum(v.to(torch.float64)) for k, v in shard.sums.items()},
                     gathered=ctx.dp_gather(shard.gathered))


def evaluate_shard(job: TrainJob, autocast, shard: tuple[int, int]) -> EvalShard:
    """One rank's share of the evaluation, the model in evaluation mode without autograd for the
    while: the loop switches modes, so a workload's evaluate only scores."""
    with evaluating(job.model):
        return job.evaluate(job.model, autocast, shard)
