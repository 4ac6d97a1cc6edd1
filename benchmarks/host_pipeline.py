"""Host work per rank at full size: the time one rank of N spends building its rows of a step's
global batch (job.batch(step, rows), what the loop's prefetch thread runs beside the step), for
N = 1, 2, 8, in CPU seconds of one intra-op thread (loader worker processes off), and the samples
per second one core sustains, beside the published per-accelerator rate
(benchmarks/published_rates.py, from the v3.1 logs). A DGX H100 has 112 cores for 8 GPUs: 14 per
GPU; the goal is 1.5x the per-GPU rate within them, and the time per rank falling as 1/N. A job's
own threads count (process CPU time), which is why it is timed without the loop's prefetch.

Each benchmark's full-size member runs on made-up data in its official on-disk format and shapes
(the workload's write_sample_data: JPEGs of ImageNet's typical size, 512-token HDF5 shards, KiTS19
volumes, LibriSpeech-length audio, ...), written to memory (/dev/shm where there is one) as the
page cache would hold the real set; the model stays on the meta device, so only host work is timed.

  python benchmarks/host_pipeline.py [MEMBER ...] [--ranks 1,2,8] [--steps 2]

MEMBER: a benchmark's full size (default: every one's) on made-up data, or another member (a CPU tier)
on its default data."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from published_rates import published_rates
from trainclock.device import system
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload import registry
from trainclock.workload.base import RunSettings, Workload

CORES_PER_GPU = 14  # DGX H100: 2 x 56 cores for 8 GPUs
META = torch.device("meta")  # the model is never built for real: host work only


def host_seconds(jobs: dict[int, object], steps: int) -> dict[int, float]:
    """CPU seconds per step that rank 0 of N spends building its rows (this process's threads: a
    workload's own look-ahead thread counts), each N with a job of its own (a loader serves one
    rank's rows). Every job first builds the timed steps once, untimed, so what a workload caches
    as it goes (a case's foreground objects, decoded eval sets) is warm for all."""
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


def single_core_settings(workload: Workload, data: str | None) -> RunSettings:
    """The workload's defaults, with loader worker processes off where it has them: their time
    would not be this process's, and one core is what is measured."""
    parser = argparse.ArgumentParser(add_help=False)
    workload.add_arguments(parser.add_argument_group())
    extra = {a.dest: a.default for a in parser._actions}
    if "loader_workers" in extra:
        extra["loader_workers"] = 0
    return RunSettings(data=data, extra=extra)


def memory_folder() -> Path:
    """A scratch folder in RAM where the machine has one (the real set would sit in the page cache)."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="trainclock-host-", dir=shm if shm.is_dir() else None))


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def measure(workload: Workload, member: str, ranks: list[int], steps: int) -> tuple[int, dict[int, float], str]:
    """(global batch, rank 0's CPU seconds per step for each N, where the data came from)."""
    folder = memory_folder() if member == workload.full_size else None
    try:
        data = None
        if folder is not None:
            gbs = workload.resolve(member, single_core_settings(workload, None), Layout(), META).global_batch_size
            written = time.perf_counter()
            data = workload.write_sample_data(member, folder, samples=gbs, seed=0)
            source = (f"made-up, official format: {folder_bytes(folder) / 1e6:,.0f} MB written in "
                      f"{time.perf_counter() - written:.0f} s")
        else:
            source = "the tier's default data"
        settings = single_core_settings(workload, data)
        spec = workload.resolve(member, settings, Layout(), META)
        gbs = spec.global_batch_size
        jobs = {n: workload.build_job(spec, single_process(), META, 1, settings) for n in ranks if gbs % n == 0}
        return gbs, host_seconds(jobs, steps), source
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("members", nargs="*", help="members (default: every benchmark's full size)")
    p.add_argument("--ranks", default="1,2,8", help="numbers of data-parallel ranks, comma-separated")
    p.add_argument("--steps", type=int, default=2, help="timed steps per N (after as many untimed)")
    args = p.parse_args()
    members = args.members or [w.full_size for w in registry.workloads()]
    ranks = [int(n) for n in args.ranks.split(",")]
    torch.set_num_threads(1)  # one core: what the rate per core means
    # the most demanding published entry of each benchmark in shared/
    published = {b: max(rows) for b, rows in published_rates().items()}
    print(f"{system.cpu_model()}, one core, load average {os.getloadavg()[0]:.1f}; published: samples/s per "
          "accelerator (benchmarks/published_rates.py)")
    header = (f"{'member':20} {'gbs':>6} " + " ".join(f"{'N=' + str(n) + ' ms CPU':>14}" for n in ranks)
              + f" {'1/N holds':>9} {'samples/s/core':>14} {'published/GPU':>13} {'cores for 1.5x':>14}")
    print(header)
    sources = []
    for member in members:
        workload, name = registry.find(member)
        gbs, seconds, source = measure(workload, name, ranks, args.steps)
        sources.append(f"{name}: {source}")
        most = max(seconds)
        per_core = gbs // most / seconds[most]  # at the rows a rank of the largest N builds: what a node's rank runs
        scaling = seconds[1] / seconds[most] / most if 1 in seconds and len(seconds) > 1 else float("nan")
        rate = published.get(workload.key, (float("nan"),))[0]
        cores = 1.5 * rate / per_core
        cells = " ".join(f"{seconds[n] * 1000:14.1f}" if n in seconds else f"{'-':>14}" for n in ranks)
        print(f"{name:20} {gbs:6} {cells} {scaling:9.0%} {per_core:14,.1f} {rate:13,.1f} {cores:14.2f}"
              + ("" if cores <= CORES_PER_GPU else "  over 14"), flush=True)
    print("'1/N holds': t(N=1) / t(N=max) / max: 100% when a rank's host time falls as 1/N; samples/s/core: "
          "a rank's rows at the largest N over its CPU time; cores for 1.5x: 1.5 x published per GPU / that")
    print("data: " + "; ".join(sources))


if __name__ == "__main__":
    main()
