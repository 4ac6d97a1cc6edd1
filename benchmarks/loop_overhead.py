"""End to end against the step alone, for any member: `trainclock run`'s own training throughput
(the summary's units/s: loop, batches, logging, progress, metrics file; evaluations excluded)
against the same workload's training step timed bare (train.step.train_step on the job the run
builds, the same batches, precision and seed), in one process, back to back, alternating, so a
shared machine's drift hits both. Prints units/s of each and the ratio.

  python benchmarks/loop_overhead.py gpt3-mini resnet-mini --samples 4096 --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from timing import CPU
from trainclock.device import system
from trainclock.device.peak import resolve_precision
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.train.options import TrainOptions
from trainclock.train.step import autocast_context, local_micro_batch, train_step, warm_up
from trainclock.train.run import RunRequest, execute
from trainclock.workload import registry
from trainclock.workload.base import RunSettings

SEED = 3


def end_to_end(member: str, samples: int, precision: str, progress: bool) -> float:
    workload, name = registry.find(member)
    spec = workload.resolve(name, RunSettings(), Layout(), CPU)
    # full_curve: evaluations stay on their cadence (excluded from units/s) and never stop the run early
    options = TrainOptions(device=CPU, precision=precision, max_samples=samples, full_curve=True)
    with tempfile.TemporaryDirectory() as out:
        result = execute(RunRequest(workload=workload, spec=spec, settings=RunSettings(), out=Path(out), seed=SEED,
                                    options=options, progress=progress))
    return result.units_per_s


def step_alone(member: str, samples: int, precision: str) -> float:
    workload, name = registry.find(member)
    spec = workload.resolve(name, RunSettings(), Layout(), CPU)
    ctx = single_process()
    job = workload.build_job(spec, ctx, CPU, SEED, RunSettings())
    optimizer = job.optimizer.build(job.model)
    options = TrainOptions(device=CPU, precision=precision)
    warm_up(job, options, ctx)
    autocast = autocast_context(options)
    micro = local_micro_batch(job, ctx)
    rows = ctx.dp_slice(job.global_batch_size)
    steps = max(samples // job.global_batch_size, 1)
    start = time.perf_counter()
    for s in range(steps):  # the batch is the loop's own work too: a bare step still assembles its batch
        train_step(job, optimizer, job.batch(s, rows), micro, autocast, CPU, ctx)
    seconds = time.perf_counter() - start
    return steps * job.global_batch_size * job.progress.units_per_sample / seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("members", nargs="+")
    p.add_argument("--samples", type=int, default=4096, help="samples each measurement trains")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--precision", default="auto", choices=("auto", "bf16", "fp32"))
    p.add_argument("--progress", action="store_true", help="with the run's progress bar, as a user sees it")
    args = p.parse_args()
    precision = resolve_precision(args.precision, CPU)
    print(f"machine: {system.cpu_model()}, {torch.get_num_threads()} threads; precision {precision}; "
          f"{args.samples:,} samples per measurement, {args.repeats} repeats alternating")
    for member in args.members:
        runs, bare = [], []
        for _ in range(args.repeats):
            bare.append(step_alone(member, args.samples, precision))
            runs.append(end_to_end(member, args.samples, precision, args.progress))
        unit = registry.member(member)[1].unit
        run_rate, bare_rate = statistics.median(runs), statistics.median(bare)
        print(f"{member}: trainclock run {run_rate:,.0f} {unit}/s, step alone {bare_rate:,.0f} {unit}/s, "
              f"ratio {run_rate / bare_rate:.3f} (medians of {args.repeats}; runs {[round(r) for r in runs]}, "
              f"steps {[round(b) for b in bare]})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
