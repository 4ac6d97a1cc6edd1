"""Host work per rank: the time one rank of N spends building its rows of a step's global batch
(job.batch(step, rows), what the loop's prefetch thread runs beside the step), for N = 1, 2, 8,
in CPU seconds of one intra-op thread (loader worker processes off), and the samples per second
one core sustains, beside the
published per-accelerator rate (benchmarks/published_rates.py, from the v3.1 logs). A DGX H100
has 112 cores for 8 GPUs: 14 per GPU; the goal is 1.5x the per-GPU rate within them, and the
time per rank falling as 1/N.

  python benchmarks/host_pipeline.py [MEMBER ...] [--ranks 1,2,8] [--steps 6]

Members are CPU tiers on their default data (prepared by `trainclock data prepare`): the per-sample
cost at a tier's shapes (28x28 images, short sequences) is smaller than at the official ones, so
the cores column is a lower bound for the full size."""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from published_rates import published_rates
from timing import CPU
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workloads import registry
from trainclock.workloads.base import RunSettings

CORES_PER_GPU = 14  # DGX H100: 2 x 56 cores for 8 GPUs


def host_seconds(jobs: dict[int, object], steps: int) -> dict[int, float]:
    """CPU seconds per step that rank 0 of N spends building its rows (this process's threads: a
    workload's own look-ahead thread counts), each N with a job of its own (a loader serves one
    rank's rows). Every job first builds the timed steps once, untimed, so what a workload caches
    as it goes (volumes in the page cache, a case's foreground objects) is warm for all."""
    for n, job in jobs.items():
        for step in range(steps):
            job.batch(step, slice(0, job.global_batch_size // n))
    seconds = {}
    for n, job in jobs.items():
        start = time.process_time()
        for step in range(steps):
            job.batch(step, slice(0, job.global_batch_size // n))
        seconds[n] = (time.process_time() - start) / steps
    return seconds


def single_core_settings(workload) -> RunSettings:
    """The workload's defaults, with loader worker processes off where it has them: their time
    would not be this process's, and one core is what is measured."""
    parser = argparse.ArgumentParser(add_help=False)
    workload.add_arguments(parser.add_argument_group())
    extra = {a.dest: a.default for a in parser._actions}
    if "loader_workers" in extra:
        extra["loader_workers"] = 0
    return RunSettings(extra=extra)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("members", nargs="*", help="CPU tiers (default: every -tiny tier)")
    p.add_argument("--ranks", default="1,2,8", help="numbers of data-parallel ranks, comma-separated")
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    members = args.members or sorted(m.name for w in registry.workloads() for m in w.members() if m.name.endswith("-tiny"))
    ranks = [int(n) for n in args.ranks.split(",")]
    torch.set_num_threads(1)  # one core: what the rate per core means
    # the most demanding published entry of each benchmark in shared/
    published = {b: max(rows) for b, rows in published_rates().items()}
    print(f"one core, load average {os.getloadavg()[0]:.1f}; published: samples/s per accelerator "
          "(benchmarks/published_rates.py)")
    print(f"{'member':16} {'gbs':>5} " + " ".join(f"{'N=' + str(n) + ' ms CPU':>14}" for n in ranks)
          + f" {'1/N holds':>9} {'samples/s/core':>14} {'published/GPU':>13} {'cores for 1.5x':>14}")
    for member in members:
        workload, name = registry.find(member)
        settings = single_core_settings(workload)
        spec = workload.resolve(name, settings, Layout(), CPU)
        gbs = spec.global_batch_size
        jobs = {n: workload.build_job(spec, single_process(), CPU, 1, settings) for n in ranks if gbs % n == 0}
        job = next(iter(jobs.values()))
        seconds = host_seconds(jobs, args.steps)
        per_core = gbs / seconds[1] if 1 in seconds else float("nan")
        scaling = seconds[1] / seconds[max(seconds)] / max(seconds) if 1 in seconds and len(seconds) > 1 else float("nan")
        rate = published.get(job.benchmark, (float("nan"),))[0]
        cores = 1.5 * rate / per_core
        cells = " ".join(f"{seconds[n] * 1000:14.2f}" if n in seconds else f"{'-':>14}" for n in ranks)
        print(f"{member:16} {gbs:5} {cells} {scaling:9.0%} {per_core:14,.0f} {rate:13,.1f} {cores:14.2f}"
              + ("" if cores <= CORES_PER_GPU else "  over 14"))
    print("'1/N holds': t(N=1) / t(N=max) / max: 100% when a rank's host time falls as 1/N")


if __name__ == "__main__":
    main()
