"""No host read inside a training step: a read (`.item()`, `float(t)`, `bool(t)`) makes the host wait
for the device, and a GPU's queue runs dry at every one. Each goes through
aten._local_scalar_dense, which a TorchDispatchMode sees on a CPU as on a GPU. The loop reads the
losses of its pending steps once per log interval (`.tolist()` of one tensor: on a GPU one copy,
not dispatched on a CPU, so the bound below allows one read per interval for it)."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.mllog import NullLog
from trainclock.train.loop import train
from trainclock.train.options import TrainOptions
from trainclock.train.progress import TrainProgress
from trainclock.train.step import autocast_context, train_step, warm_up
from trainclock.workload import registry
from trainclock.workload.base import EvalShard, EvalSchedule, RunSettings
from tests.host_reads import HostReads

CPU = torch.device("cpu")
STEPS, EVERY = 20, 10


@pytest.fixture(scope="module")
def job(corpus_dir):
    """gpt3-tiny as the run builds it (it clips gradients: the clip is applied on the device)."""
    workload, name = registry.find("gpt3-tiny")
    settings = RunSettings(data=str(corpus_dir))
    spec = workload.resolve(name, settings, Layout(), CPU)
    job = workload.build_job(spec, single_process(), CPU, 3, settings)
    assert job.optimizer.gradient_clip_norm is not None
    return job


def test_a_training_step_reads_nothing_back(job):
    optimizer = job.optimizer.build(job.model)
    ctx, options = single_process(), TrainOptions(device=CPU, precision="fp32")
    warm_up(job, options, ctx)
    rows = ctx.dp_slice(job.global_batch_size)
    with HostReads() as reads:
        for step in range(3):
            loss, norm = train_step(job, optimizer, job.batch(step, rows), job.micro_batch_size,
                                    autocast_context(options), CPU, ctx)
    assert reads.count == 0
    assert math.isfinite(loss.item()) and norm is not None and norm.item() > 0


def test_the_loop_reads_once_per_log_interval(job):
    """STEPS steps, the losses read every EVERY: at most one read per interval (the evaluation is
    stubbed out: its metrics are read where the rules want them, outside the steps)."""
    quiet = replace(job, evaluate=lambda m, autocast, shard: EvalShard(), score=lambda stats: {t.metric: 99.0 for t in job.quality},
                    eval_schedule=EvalSchedule(every=10**9))
    optimizer = quiet.optimizer.build(quiet.model)
    options = TrainOptions(device=CPU, precision="fp32", max_samples=STEPS * job.global_batch_size, log_every_steps=EVERY)
    metrics = io.StringIO()
    with TrainProgress(options.max_samples, quiet.quality, "tokens", enabled=False) as progress, HostReads() as reads:
        outcome = train(quiet, optimizer, options, NullLog(), metrics, progress, single_process())
    assert outcome.steps == STEPS
    assert reads.count <= STEPS // EVERY, f"{reads.count} host reads in {STEPS} steps"
    losses = [line for line in metrics.getvalue().splitlines() if '"loss"' in line]
    assert len(losses) == STEPS  # every step's loss is still recorded, read in one go per interval


# Steps that still read back, each with what reads and the issue that removes it: xfail(strict), so
# the test fails as soon as one is fixed and its entry must go.
STILL_READING: dict[str, str] = {}
TIERS = sorted((w.key, m.name) for w in registry.workloads() for m in w.members() if m.name.endswith("-tiny"))


@pytest.mark.slow
@pytest.mark.parametrize("member", [pytest.param(name, marks=pytest.mark.xfail(key in STILL_READING, strict=True,
                                                                                reason=STILL_READING.get(key, "")))
                                    for key, name in TIERS])
def test_every_tiers_step_reads_nothing_back(member, monkeypatch):
    from tests.workloads.helpers import prepare_data

    monkeypatch.delenv("TRAINCLOCK_HOME", raising=False)  # the tiers' data, prepared once for the session
    prepare_data(member)
    workload, name = registry.find(member)
    spec = workload.resolve(name, RunSettings(), Layout(), CPU)
    ctx, options = single_process(), TrainOptions(device=CPU, precision="fp32")
    job = workload.build_job(spec, ctx, CPU, 1, RunSettings())
    optimizer = job.optimizer.build(job.model)
    warm_up(job, options, ctx)
    batch = job.batch(1, ctx.dp_slice(job.global_batch_size))
    with HostReads() as reads:
        train_step(job, optimizer, batch, job.micro_batch_size, autocast_context(options), CPU, ctx)
    assert reads.count == 0, f"{reads.count} host reads in one step"
