"""The throughput scripts' shared harness: their command line, the job built through the workload
interface as `trainclock run` builds it, trainclock's own training step over it, the timing of
that step beside a script's plain reference loop (each timing paired with the machine's matmul peak
measured around it: a shared CPU's speed drifts), and the lines they print.

A script keeps only what is its own benchmark's: the plain loop a user would otherwise write, and
any special mode. It names no benchmark here: everything comes from the registry and the job.

    args = harness.parser(__doc__, member="x-mini", steps=8).parse_args()
    bench = harness.Bench.build(args.member)          # workload, spec, job, context
    bench.header(args.steps)
    batches = bench.batches(args.steps + 1)           # the loop's own batches, for both loops
    plain = my_plain_step(bench.job, batches)          # copies the start weights first
    harness.compare({"trainclock": bench.step(batches), "plain": plain}, bench, args.steps)
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trainclock.distributed.context import ParallelContext, single_process
from trainclock.train.step import evaluate_shard, train_step
from trainclock.workload import registry
from trainclock.workload.base import RunSettings, RunSpec, TrainJob, Workload
from timing import CPU, autocast_for, machine_peak, sync, timed, timed_at_peak

Step = Callable[[int], object]
# a timing of several loops: name -> (seconds per step, machine peak around it)
Timing = Callable[[dict[str, Step], int], dict[str, tuple[float, float]]]


def parser(doc: str | None, member: str | None = None, steps: int = 8) -> argparse.ArgumentParser:
    """--member and --steps, the options every throughput script has; a script adds its own."""
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    if member is not None:
        p.add_argument("--member", default=member, help=f"the member to time (default {member})")
    p.add_argument("--steps", type=int, default=steps, help=f"timed steps per loop (default {steps})")
    return p


@dataclass
class Bench:
    """One member's job, built through the workload interface as train/run.py builds it."""

    workload: Workload
    spec: RunSpec
    job: TrainJob
    ctx: ParallelContext
    device: torch.device
    settings: RunSettings

    @classmethod
    def build(cls, member: str, settings: RunSettings | None = None, device: torch.device = CPU,
              seed: int = 1, spec_of: Callable[[RunSpec], RunSpec] | None = None) -> "Bench":
        """`spec_of`: a change to the resolved spec (a script's own variant: loader workers, layout)."""
        settings = settings or RunSettings()
        workload, name = registry.find(member)
        ctx = single_process()
        spec = workload.resolve(name, settings, ctx.layout, device)
        if spec_of is not None:
            spec = spec_of(spec)
        job = workload.build_job(spec, ctx, device, seed, settings)
        return cls(workload, spec, job, ctx, device, settings)

    def rebuild(self, settings: RunSettings | None = None, spec: RunSpec | None = None) -> "Bench":
        """The same member's job again, fresh start weights and optimizer state (one per mode)."""
        settings = settings or self.settings
        spec = spec or self.spec
        job = self.workload.build_job(spec, self.ctx, self.device, 1, settings)
        return Bench(self.workload, spec, job, self.ctx, self.device, settings)

    @property
    def samples_per_step(self) -> int:
        return self.job.global_batch_size

    def header(self, steps: int, what: str | None = None, **more: Any) -> None:
        """The line every script opens with: what one step holds, the threads and the machine's load."""
        what = what or f"{self.samples_per_step} {self.job.progress.unit if self.job.progress.units_per_sample == 1 else 'samples'} per step"
        extra = "".join(f", {v}" for v in more.values())
        print(f"{self.job.name}: {what}, {steps} timed steps, {torch.get_num_threads()} threads{extra}, "
              f"load average {os.getloadavg()[0]:.1f}")

    def batches(self, count: int) -> list:
        """Batches 0..count-1 of the loop's own data, whole global batches, read before any timing."""
        return [self.job.batch(s, slice(0, self.samples_per_step)) for s in range(count)]

    def step(self, batches: Sequence | None, precision: str = "fp32") -> Step:
        """trainclock's training step (train.step.train_step, the generic loop's) over the job: the
        optimizer the job names, autocast by precision. Without `batches` each step reads its batch
        (the loader inside the timing)."""
        job, ctx, device = self.job, self.ctx, self.device
        optimizer, autocast = job.optimizer.build(job.model), autocast_for(precision, device)
        rows = slice(0, self.samples_per_step)

        def step(s: int) -> None:
            batch = batches[s] if batches is not None else job.batch(s, rows)
            train_step(job, optimizer, batch, job.micro_batch_size, autocast, device, ctx)

        return step


def side_by_side(steps: int, first: int = 1, warm_up: int = 1, device: torch.device = CPU) -> Timing:
    """The default timing: each loop in turn, `warm_up` untimed steps, then `steps` timed ones."""

    def timing(loops: dict[str, Step], _steps: int) -> dict[str, tuple[float, float]]:
        return {name: timed_at_peak(step, steps, first, warm_up, device) for name, step in loops.items()}

    return timing


def interleaved(steps: int, rounds: int = 3, warm_up: int = 3, device: torch.device = CPU) -> Timing:
    """The loops take turns in `rounds` rounds of steps/rounds steps (a shared CPU's speed drifts
    over a run), the best round of each kept; `warm_up` untimed steps of each first."""

    def timing(loops: dict[str, Step], _steps: int) -> dict[str, tuple[float, float]]:
        for step in loops.values():
            for s in range(warm_up):
                step(s)
        best: dict[str, tuple[float, float]] = {}
        per_round = max(1, steps // rounds)
        for r in range(rounds):
            for name, step in loops.items():
                seconds, peak = timed_at_peak(step, per_round, warm_up + r * per_round, 0, device)
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, peak)
        return best

    return timing


def rate_format(rate: float) -> str:
    return f"{rate:8,.0f}" if rate >= 100 else f"{rate:8.1f}" if rate >= 10 else f"{rate:8.2f}"


def compare(loops: dict[str, Step], bench: Bench, steps: int, label: str = "", unit: str | None = None,
            units_per_step: float | None = None, extras: Callable[[float], str] | None = None,
            timing: Timing | None = None, mfu: bool = True) -> dict[str, float]:
    """Times each loop, prints one line per loop (units/s, the script's extra figures, MFU against
    the peak measured around that timing) and the ratio of the first loop to the second; returns
    units/s per loop. The FLOPs are the job's (the model's useful work, the same for every loop).
    unit/units_per_step: default the job's progress unit (images, tokens, samples)."""
    job = bench.job
    unit = unit or job.progress.unit
    units_per_step = units_per_step or bench.samples_per_step * job.progress.units_per_sample
    timing = timing or side_by_side(steps, device=bench.device)
    rates = {}
    for name, (seconds, peak) in timing(loops, steps).items():
        rates[name] = units_per_step / seconds
        line = f"  {label + ' ' if label else ''}{name:10} {rate_format(rates[name])} {unit}/s"
        if extras is not None:
            line += f"  {extras(seconds)}"
        if mfu and job.flops_per_sample:
            line += f"  MFU {job.flops_per_sample * bench.samples_per_step / seconds / peak:6.1%}"
        print(line + f"  (peak {peak / 1e9:,.0f} GFLOP/s)")
    first, second = list(rates)[:2]
    print(f"  {label + ' ' if label else ''}ratio {first} / {second}: {rates[first] / rates[second]:.2f}")
    return rates


def timed_evaluation(bench: Bench, precision: str = "fp32") -> tuple[float, dict[str, float]]:
    """Seconds of one whole evaluation (the job's evaluate over the whole validation set, then its
    score), and the metrics it gave."""
    start = time.perf_counter()
    shard = evaluate_shard(bench.job, autocast_for(precision, bench.device), (0, 1))
    metrics = bench.job.score(shard)
    sync(bench.device)
    return time.perf_counter() - start, metrics


def loader_rate(bench: Bench, steps: int) -> float:
    """Samples/s of the job's batches alone (first batch untimed)."""
    rows = slice(0, bench.samples_per_step)
    return bench.samples_per_step / timed(lambda s: bench.job.batch(s, rows), steps, first=1, warm_up=1)


# the generic measurement: any member, trainclock's step alone in each mode, against eager fp32
MODES = {"fp32": ("fp32", False), "bf16": ("bf16", False), "compiled": ("bf16", True)}


def measure(member: str, mode: str, steps: int, device: torch.device, warm_up: int = 3) -> dict:
    """trainclock's step of `member` in `mode`: units/s, achieved FLOP/s, the machine peak around the
    timing, MFU and the warm-up's seconds (compilation, first touch). Batches are read ahead (the
    loop prefetches them on an accelerator); the loader's own rate is `loader_rate`."""
    precision, compiled = MODES[mode]
    torch.manual_seed(0)
    bench = Bench.build(member, RunSettings(compile=compiled), device)
    batches = bench.batches(warm_up + steps)
    step = bench.step(batches, precision)
    start = time.perf_counter()
    for s in range(warm_up):
        step(s)
    sync(device)
    warm_up_s = time.perf_counter() - start
    peak_before = machine_peak(device)
    seconds = timed(step, steps, warm_up, 0, device)
    peak = (peak_before + machine_peak(device)) / 2
    job = bench.job
    units_per_s = bench.samples_per_step * job.progress.units_per_sample / seconds
    flops = job.flops_per_sample * bench.samples_per_step / seconds
    return {"member": job.name, "mode": mode, "unit": job.progress.unit, "units_per_s": units_per_s,
            "gflops": flops / 1e9, "peak_gflops": peak / 1e9, "mfu": flops / peak, "warmup_s": warm_up_s}


def print_measurements(members: Sequence[str], modes: Sequence[str], steps: int, device: torch.device) -> None:
    """The generic table: per member and mode units/s, GFLOP/s, peak, MFU, the ratio to the first
    mode (eager fp32: the plain reference) and the warm-up's seconds."""
    print(f"{'member':<22} {'mode':<9} {'units/s':>10} {'unit':<11} {'GFLOP/s':>8} {'peak':>9} {'MFU':>6} "
          f"{'vs ' + modes[0]:>8} {'warm-up s':>9}")
    for member in members:
        reference = None
        for mode in modes:
            r = measure(member, mode, steps, device)
            reference = reference or r["units_per_s"]
            print(f"{r['member']:<22} {mode:<9} {r['units_per_s']:>10,.1f} {r['unit']:<11} {r['gflops']:>8,.1f} "
                  f"{r['peak_gflops']:>9,.0f} {r['mfu']:>6.1%} {r['units_per_s'] / reference:>7.2f}x {r['warmup_s']:>9.1f}")
