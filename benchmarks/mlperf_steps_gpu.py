"""Every benchmark's full-size training step on one GPU, as trainclock runs it: units/s per GPU, MFU,
peak memory, where a step's time goes, and the ratio to the published per-GPU rates. Not a test.

For each benchmark of the registry: its full-size member's made-up data in the official format and
shapes (workload.write_sample_data, in /dev/shm where there is room), its job built on the meta
device (batches of the official shapes, the loss, the optimizer, the micro-batch: no weights), the
real model built on the GPU (workload.build_model) and put in the job, a few batches moved to the
GPU once, then the loop's own `train_step` (bf16 autocast, the job's optimizer with the loop's
learning-rate setting, gradient accumulation over the job's micro-batches, clipping where the job
clips) timed over as many steps as the time budget allows. A step trains rows = the per-GPU share
of the 8-GPU global batch (gbs // 8, what one GPU of the published 8-GPU entries trains). One GPU
alone: no gradient all-reduce and no embedding exchange is timed, which the 8-GPU rate also pays.

Columns: units/s per GPU in the job's progress unit (tokens/s and sequences/s for GPT-3); MFU
against the bf16 matmul peak measured in this run (device.peak), where the job defines FLOPs per
sample; peak memory (torch.cuda.max_memory_allocated); per step the GPU time of the loop's
"forward and backward" and "optimizer" regions (CUDA events), the rest of the step's wall time
(launch gaps), and the host time one process takes to build the step's rows (job.batch, which the
loop runs on a prefetch thread beside the step); the ratio to the per-GPU rates computed from the
published logs (benchmarks/published_rates.py: Dell 8 x H100 and NVIDIA, v3.1).

Where a full size cannot be built on one GPU, a table of overrides by benchmark key (OVERRIDES)
cuts it, says why on the row, and scales the rate honestly: a layer cut measures fewer layers and
reports the full model's rate at the same FLOP rate (measured rate x FLOPs kept / FLOPs of the full
model); a table cut keeps what one GPU of the 8-GPU node holds. A step too long for the time
budget is run on fewer of its micro-batches (said on the row: the optimizer is then amortised over
fewer rows, so the rate is a lower bound). Out-of-memory and other failures are reported on their
row; the next benchmark starts from freed memory.

  python benchmarks/mlperf_steps_gpu.py [--only KEY,...] [--skip KEY,...] [--seconds-per-benchmark 20]
      [--max-minutes 7.5] [--json PATH] [--data-dir DIR] [--published FILE] [--fp8] [--compile]
  python benchmarks/mlperf_steps_gpu.py --cpu-smoke [--json PATH]   # CI: each -tiny tier on CPU, fp32, 2 steps
  python benchmarks/mlperf_steps_gpu.py --save-published FILE       # here, where shared/ holds the logs
  python benchmarks/mlperf_steps_gpu.py --report RUN.json            # a GPU run's table again, with the rates here

--fp8 adds, beside the row of each benchmark whose workload declares its own --fp8 flag, a row timed
with that flag on, in the same run on the same GPU (same cut, same batches), and the rate of the two
(fp8 / bf16) on the fp8 row; its MFU stays against the bf16 peak. FP8 training's scaling casts are
only fused under torch.compile: --compile builds every row's model compiled (compile time untimed).

The JSON (--json, default mlperf_steps_gpu.json in $OUT if set, else here) holds every figure and
the third-party distributions the run imported: what a bare GPU machine needs beside PyTorch.
The device machine has no shared/: pass the rates with --published (written by --save-published),
or re-print the run's JSON here with --report.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:  # runs from a checkout without `pip install -e` (a bare GPU machine)
    sys.path.insert(0, str(SRC))

from trainclock.device.peak import DTYPES, matmul_peak_flops  # noqa: E402
from trainclock.distributed.context import single_process  # noqa: E402
from trainclock.distributed.layout import Layout  # noqa: E402
from trainclock.train.options import TrainOptions  # noqa: E402
from trainclock.train.step import autocast_context, train_step  # noqa: E402
from trainclock.train.profile import FORWARD_BACKWARD, OPTIMIZER  # noqa: E402
from trainclock.workload import registry  # noqa: E402
from trainclock.workload.base import RunSettings, TrainJob, Workload  # noqa: E402

META = torch.device("meta")
GPUS_PER_NODE = 8  # the published entries compared against: 8 GPUs per node, each training gbs // 8 rows
SEED = 1
MEMORY_FRACTION = 0.8  # of the device's memory a cut model may plan for: the rest for the allocator's slack
SHM_NEEDED = 16 * 2**30  # the largest sample set (3D U-Net's volumes) is about 6.5 GB: /dev/shm only with room
SMOKE_SUFFIX = "-tiny"  # --cpu-smoke: each benchmark's smallest CPU tier


# ---------------------------------------------------------------------------------------------------
# Overrides: the only place a benchmark is named. A cut takes the full size's resolved spec and the
# bytes the model may use, and returns the spec to build (the same spec where it fits) and a note.


@dataclasses.dataclass(frozen=True)
class Cut:
    reason: str  # one line: why the full size cannot be built as it is on one GPU
    apply: Callable[[Any, int], tuple[Any, str | None]]  # (spec, device bytes) -> (spec to build, note or None)


def _gpt3_layers(spec: Any, memory: int) -> tuple[Any, str | None]:
    """The most layers whose weights, gradients, Adam states and one micro-batch's activations fit
    (the workload's own estimate, GPT3Spec.training_memory_bytes)."""
    def with_layers(n: int) -> Any:
        return dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, n_layer=n))

    full = spec.shape.n_layer
    layers = max((n for n in range(1, full + 1) if with_layers(n).training_memory_bytes() <= memory), default=1)
    if layers == full:
        return spec, None
    return with_layers(layers), f"{layers} of {full} layers"


def _dlrm_tables(spec: Any, memory: int) -> tuple[Any, str | None]:
    """Every table's rows over the node's 8 GPUs: the share one GPU holds when the tables are
    sharded. Lookups and FLOPs per sample are unchanged; ids are hashed into the cut tables."""
    rows = tuple(-(-r // GPUS_PER_NODE) for r in spec.shape.rows)
    cut = dataclasses.replace(spec, shape=dataclasses.replace(spec.shape, rows=rows))
    if spec.shape.parameter_count() * 12 <= memory:
        return spec, None  # a tier's tables fit whole: fp32 weights, gradients and Adagrad state
    return cut, (f"tables cut to 1/{GPUS_PER_NODE} of their rows ({spec.shape.parameter_count() / 1e9:.1f}B -> "
                 f"{cut.shape.parameter_count() / 1e9:.2f}B parameters)")


OVERRIDES: dict[str, Cut] = {
    # 175B parameters take 2.8 TB with gradients and Adam states: one GPU holds a few of its 96 layers
    "gpt3": Cut("GPT-3 175B cut to the layers one GPU holds; rate scaled to the full model at the same FLOP rate",
                _gpt3_layers),
    # 26B table parameters (104 GB in fp32) with their Adagrad state exceed one GPU; a GPU of 8 holds 1/8
    "dlrm_dcnv2": Cut("DLRM tables cut to one GPU's share of an 8-GPU node (1/8 of the rows); no exchange timed",
                      _dlrm_tables),
}


# ---------------------------------------------------------------------------------------------------
# Timing


class RegionTimer:
    """The loop's profiler interface (train_step calls region(name) around forward+backward and the
    optimizer): CUDA events on a GPU, so nothing waits inside a step; wall time on a CPU, where the
    work is done when the region ends."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.enabled = False
        self._marks: list[tuple[str, Any, Any]] = []

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start = self._mark()
        yield
        self._marks.append((name, start, self._mark()))

    def stepped(self) -> None:
        pass

    def _mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self) -> dict[str, float]:
        """Seconds in each region since the last reset (call after the device has finished)."""
        total: dict[str, float] = {}
        for name, start, end in self._marks:
            total[name] = total.get(name, 0.0) + (start.elapsed_time(end) / 1000 if self.cuda else end - start)
        return total


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclasses.dataclass
class Steps:
    """What the timed steps measured."""

    rows: int  # rows per step actually trained
    steps: int
    seconds: float  # wall time of the timed steps
    regions: dict[str, float]  # seconds per region over the timed steps
    loss: float  # the last step's loss
    cut_micro_batches: str | None  # a note where the time budget cut the step's micro-batches


def run_steps(job: TrainJob, batches: list[Any], rows: int, micro: int, options: TrainOptions, budget_s: float,
              warmup: int, max_steps: int) -> Steps:
    """Warm-up steps, then timed steps of the loop's train_step over the device-resident batches,
    as many as fit the budget (at least one). A step whose micro-batches would not fit the budget
    a few times over is cut to fewer of them, measured on the first micro-batch."""
    device = options.device
    ctx = single_process()
    autocast = autocast_context(options)
    optimizer = job.optimizer.build(job.model)
    timer = RegionTimer(device)
    started = time.perf_counter()
    step = 0

    def one(batch: Any, rows_now: int) -> torch.Tensor:
        nonlocal step
        lr = job.optimizer.lr_at(step)  # as the loop sets it before every step
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss, _ = train_step(job, optimizer, job.batches.rows(batch, slice(0, rows_now)), micro, autocast, device,
                             ctx, timer)
        step += 1
        return loss

    note = None
    n_micro = -(-rows // micro)
    if n_micro > 1:  # a step of many micro-batches (GPT-3: 192) may take longer than the budget: probe one
        for _ in range(2):  # the first pays the allocator, cuDNN's timings and the optimizer's state
            probe_start = time.perf_counter()
            one(batches[0], micro)
            synchronize(device)
        per_micro = time.perf_counter() - probe_start
        affordable = int(budget_s / (warmup + 2) / per_micro)  # warm-up steps and two timed ones
        if affordable < n_micro:
            kept = max(1, affordable)
            note = (f"{kept} of {n_micro} micro-batches per step ({kept * micro} of {rows} rows) to fit the time "
                    f"budget: the optimizer is amortised over fewer rows, so the rate is a lower bound")
            rows, n_micro = kept * micro, kept
    last = 0.0
    for i in range(warmup):
        t0 = time.perf_counter()
        one(batches[i % len(batches)], rows)
        synchronize(device)
        last = time.perf_counter() - t0
    remaining = budget_s - (time.perf_counter() - started)
    steps = max(1, min(max_steps, int(remaining / last) if last > 0 else max_steps))
    timer.enabled = True
    t0 = time.perf_counter()
    for i in range(steps):
        loss = one(batches[i % len(batches)], rows)
    synchronize(device)
    seconds = time.perf_counter() - t0
    timer.enabled = False
    result = Steps(rows, steps, seconds, timer.seconds(), float(loss), note)
    del optimizer
    return result


# ---------------------------------------------------------------------------------------------------
# One benchmark


FP8_FLAG = "fp8"  # the workload flag (RunSettings.extra key) --fp8 turns on for a second row


def default_settings(workload: Workload, data: str | None, compile: bool = False,
                     on: tuple[str, ...] = ()) -> RunSettings:
    """The workload's own flags at their defaults, as `trainclock run` passes them (RunSettings.extra),
    with the boolean flags named in `on` set."""
    extra = workload_flags(workload)
    extra.update({flag: True for flag in on})
    return RunSettings(data=data, compile=compile, extra=extra)


def workload_flags(workload: Workload) -> dict[str, Any]:
    """The workload's own flags (add_arguments) by dest, at their defaults."""
    parser = argparse.ArgumentParser(add_help=False)
    workload.add_arguments(parser.add_argument_group())
    return {a.dest: a.default for a in parser._actions}


def device_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@contextlib.contextmanager
def data_home(folder: Path | None) -> Iterator[None]:
    """A full size's caches (GPT-3's tokenized sample) beside its made-up data, not in the user's
    data home; a tier keeps the real one, where its default data is prepared once."""
    if folder is None:
        yield
        return
    old = os.environ.get("TRAINCLOCK_HOME")
    os.environ["TRAINCLOCK_HOME"] = str(folder / "home")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRAINCLOCK_HOME", None)
        else:
            os.environ["TRAINCLOCK_HOME"] = old


def scratch_root() -> Path:
    """/dev/shm where it has room for the largest sample set (the real data would sit in the page cache)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > SHM_NEEDED:
        return shm
    return Path(tempfile.gettempdir())


def sample_data(workload: Workload, member: str, samples: int, root: Path) -> tuple[str, Path, float]:
    """The member's made-up data under root/<member> (kept from an earlier run with --data-dir):
    the --data value, the folder and the seconds spent writing it."""
    folder = root / member
    done = folder / ".written"
    if done.is_file():
        return done.read_text(), folder, 0.0
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    data = workload.write_sample_data(member, folder / "data", samples=samples, seed=0)
    done.write_text(data)
    return data, folder, time.perf_counter() - t0


def measure(row: dict[str, Any], workload: Workload, member: str, args: argparse.Namespace, device: torch.device,
            precision: str, peak: float, root: Path | None, on: tuple[str, ...] = ()) -> None:
    """Fills one benchmark's row as it is built, stepped and timed. Raises what fails, the row then
    holding what was known (a cut, the setup's figures); the caller reports the failure on it."""
    full = member == workload.full_size
    t0 = time.perf_counter()
    folder = None
    data = None
    if full:
        gbs = workload.resolve(member, default_settings(workload, None), Layout(), META).global_batch_size
        data, folder, row["data_write_s"] = sample_data(workload, member, gbs, root)
    settings = default_settings(workload, data, compile=args.compile, on=on)
    with data_home(folder):
        # on meta, resolve checks the batch and the layout only: the fit is the cut's (and the GPU's) to say
        spec = workload.resolve(member, settings, Layout(), META)
        job = workload.build_job(spec, single_process(), META, SEED, settings)
        row["flops_per_sample_full"] = job.flops_per_sample
        cut = OVERRIDES.get(workload.key)
        note = None
        if cut is not None:
            spec, note = cut.apply(spec, int(MEMORY_FRACTION * device_memory(device)))
        if note:
            row["cut"] = {"reason": cut.reason, "what": note}
            row["notes"].append(f"{note}: {cut.reason}")
            job = workload.build_job(spec, single_process(), META, SEED, settings)  # batches of the cut spec
        rows = max(1, job.global_batch_size // GPUS_PER_NODE)
        micro = min(job.micro_batch_size, rows)
        row.update(unit=job.progress.unit, units_per_sample=job.progress.units_per_sample,
                   global_batch_size=job.global_batch_size, rows_per_gpu=rows, micro_batch=micro,
                   flops_per_sample=job.flops_per_sample)
        host: list[float] = []
        batches = []
        for step in range(args.batches):  # built once on the host, moved once: the timed steps read none
            b0 = time.perf_counter()
            batch = job.batch(step, slice(0, rows))
            host.append(time.perf_counter() - b0)
            batches.append(job.batches.to(batch, device))
        row["host_batch_ms"] = 1000 * min(host)  # the first may pay a loader's start-up
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = job.fixed_input_shapes  # as train.run does
    torch.manual_seed(SEED)
    job = dataclasses.replace(job, model=workload.build_model(spec, single_process(), device, settings))
    row["parameters"] = sum(p.numel() for p in job.model.parameters())
    row["setup_s"] = time.perf_counter() - t0
    options = TrainOptions(device=device, precision=precision)
    steps = run_steps(job, batches, rows, micro, options, args.seconds_per_benchmark, args.warmup, args.max_steps)
    if steps.cut_micro_batches:
        row["notes"].append(steps.cut_micro_batches)
    step_s = steps.seconds / steps.steps
    samples_per_s = steps.rows / step_s
    kept = job.flops_per_sample / row["flops_per_sample_full"] if note and row["flops_per_sample_full"] else 1.0
    fwd_bwd = steps.regions.get(FORWARD_BACKWARD, 0.0) / steps.steps
    optimizer = steps.regions.get(OPTIMIZER, 0.0) / steps.steps
    row.update(
        rows_trained=steps.rows, steps_timed=steps.steps, step_ms=1000 * step_s, loss=steps.loss,
        measured_samples_per_s=samples_per_s, measured_units_per_s=samples_per_s * job.progress.units_per_sample,
        # the full size's rate: the measured one where nothing was cut, else at the FLOP rate measured
        samples_per_s=samples_per_s * kept, units_per_s=samples_per_s * kept * job.progress.units_per_sample,
        flops_kept=kept, forward_backward_ms=1000 * fwd_bwd, optimizer_ms=1000 * optimizer,
        other_ms=1000 * max(0.0, step_s - fwd_bwd - optimizer),
        mfu=samples_per_s * job.flops_per_sample / peak if job.flops_per_sample and peak else None,
        peak_memory_gib=torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
        host_bound=row["host_batch_ms"] > 1000 * step_s * rows / steps.rows,  # against a step of all its rows
    )
    if kept != 1.0:
        row["notes"].append(f"measured {row['measured_units_per_s']:,.1f} {job.progress.unit}/s on the cut model; "
                            f"x {kept:.4f} (its FLOPs per sample over the full model's) = the full model's rate")
    if row["host_bound"]:
        row["notes"].append(f"one process builds a step's rows in {row['host_batch_ms']:,.0f} ms, slower than the "
                            "step: host-bound without more loader workers")


def compare_with_default(row: dict, base: dict | None) -> None:
    """A variant's rate over its benchmark's default row, both measured in this run on this GPU."""
    if row.get("status") != "ok" or base is None or base.get("status") != "ok":
        return
    row["speedup_vs_default"] = row["units_per_s"] / base["units_per_s"]
    row["notes"].append(f"{row['speedup_vs_default']:.2f}x the default row's {row['unit']}/s "
                        f"({row['units_per_s']:,.1f} vs {base['units_per_s']:,.1f}, this run, this GPU); "
                        "MFU against the bf16 peak")


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def measure_row(workload: Workload, member: str, args: argparse.Namespace, device: torch.device, precision: str,
                peak: float, root: Path | None, on: tuple[str, ...] = ()) -> dict:
    """measure(), with a failure reported on the row instead of ending the run; `on`: the workload's
    boolean flags this row turns on (its variant)."""
    free_memory(device)  # the peak counted from here: not the matmul peak's or an earlier benchmark's tensors
    t0 = time.perf_counter()
    row: dict[str, Any] = {"benchmark": workload.key, "member": member, "variant": "+".join(on) or None, "notes": []}
    try:
        measure(row, workload, member, args, device, precision, peak, root, on)
        row["status"] = "ok"
    except torch.cuda.OutOfMemoryError as e:
        row.update(status="out of memory", error=str(e).splitlines()[0][:300])
        if device.type == "cuda":
            row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    except Exception as e:  # noqa: BLE001 - any failure is one benchmark's row, not the run's end
        print(traceback.format_exc(limit=-6), file=sys.stderr, flush=True)
        row.update(status="error", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
    row["seconds"] = time.perf_counter() - t0
    free_memory(device)  # the traceback (and the tensors its frames held) is gone here
    return row


# ---------------------------------------------------------------------------------------------------
# Published rates and the table


def load_published(path: Path | None) -> tuple[dict[str, list[dict]], str]:
    """Benchmark -> [{system, samples_per_s}] per accelerator: from a saved file, or computed from the
    logs in shared/ (published_rates.py; absent on a bare GPU machine)."""
    if path is not None:
        return json.loads(path.read_text()), f"from {path}"
    try:
        from published_rates import DEFAULT_TREES, published_rates
    except ImportError as e:  # the review's dependencies are not on every GPU machine
        return {}, f"not available ({e}); re-print this run's JSON with --report where shared/ is"
    if not any(tree.is_dir() for tree in DEFAULT_TREES):
        return {}, "not available (no shared/ here); pass --published FILE or re-print the JSON with --report"
    rates = {benchmark: [{"system": system_name, "samples_per_s": rate, "runs": runs}
                         for rate, runs, system_name in entries]
             for benchmark, entries in published_rates().items()}
    return rates, "from the v3.1 logs in shared/ (benchmarks/published_rates.py)"


def attach_published(rows: list[dict], published: dict[str, list[dict]]) -> None:
    for row in rows:
        if row.get("status") != "ok" or row["member"].endswith(SMOKE_SUFFIX):
            continue
        row["published"] = [{**entry, "ratio": row["samples_per_s"] / entry["samples_per_s"]}
                            for entry in published.get(row["benchmark"], []) if entry["samples_per_s"] > 0]


def _ratio(row: dict, submitter: str) -> str:
    ratios = [e["ratio"] for e in row.get("published", []) if e["system"].startswith(submitter + "/")]
    if not ratios:
        return "-"
    return f"{ratios[0]:.2f}x" if ratios[0] >= 0.1 else f"{ratios[0]:.2g}x"  # two digits that say something


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(report: dict) -> None:
    print(f"{'benchmark':16} {'member':20} {'units/s per GPU':>22} {'samples/s':>11} {'MFU':>6} {'GiB':>6} "
          f"{'fwd+bwd ms':>10} {'opt ms':>8} {'other ms':>8} {'host ms':>9} {'vs Dell':>8} {'vs NVIDIA':>9}")
    for row in report["rows"]:
        member = row["member"] + (f" {row['variant']}" if row.get("variant") else "")
        if row.get("status") != "ok":
            print(f"{row['benchmark']:16} {member:20} {row['status']}: {row.get('error', '')}")
            continue
        units = f"{row['units_per_s']:,.1f} {row['unit']}" + ("*" if row.get("cut") else "")
        print(f"{row['benchmark']:16} {member:20} {units:>22} {row['samples_per_s']:>11,.2f} "
              f"{_fmt(row['mfu'], '.1%'):>6} {_fmt(row['peak_memory_gib'], '.1f'):>6} "
              f"{row['forward_backward_ms']:>10.1f} {row['optimizer_ms']:>8.1f} {row['other_ms']:>8.1f} "
              f"{row['host_batch_ms']:>9.1f} {_ratio(row, 'Dell'):>8} {_ratio(row, 'NVIDIA'):>9}")
    for row in report["rows"]:
        for note in row.get("notes", []):
            print(f"  {row['benchmark']}{' ' + row['variant'] if row.get('variant') else ''}: {note}")
    print("units/s and samples/s: per GPU, the full size's (* measured on a cut model: see its note); ms: per step "
          "of rows = gbs/8 (GPU time of the loop's regions; other: the rest of the step's wall time; host: one process "
          f"building the step's rows); published per-GPU rates {report.get('published_source', 'not loaded')}")


# ---------------------------------------------------------------------------------------------------


def imported_distributions() -> list[str]:
    """Third-party distributions this process imported (beside torch): what a bare machine needs."""
    owners = importlib.metadata.packages_distributions()
    ours = {"torch", "trainclock", "published_rates", "timing", "__main__"}
    names = {name.split(".")[0] for name in list(sys.modules)}
    found = set()
    for name in names - set(sys.stdlib_module_names) - ours:
        if name.startswith("_"):
            continue
        for dist in owners.get(name, []):
            if dist.lower() not in {"torch", "trainclock"}:
                found.add(dist)
    return sorted(found, key=str.lower)


def default_json() -> Path:
    out = os.environ.get("OUT")
    return (Path(out) if out else Path.cwd()) / "mlperf_steps_gpu.json"


def selected(only: str | None, skip: str | None) -> list[Workload]:
    keys = {w.key for w in registry.workloads()}
    chosen = set(only.split(",")) if only else set(keys)
    dropped = set(skip.split(",")) if skip else set()
    unknown = (chosen | dropped) - keys
    if unknown:
        sys.exit(f"mlperf_steps_gpu.py: unknown benchmark key(s) {', '.join(sorted(unknown))}; "
                 f"choose from {', '.join(sorted(keys))}")
    return [w for w in registry.workloads() if w.key in chosen - dropped]


def smallest_tier(workload: Workload) -> str:
    tiers = [m.name for m in workload.members() if m.name.endswith(SMOKE_SUFFIX)]
    if not tiers:
        raise SystemExit(f"mlperf_steps_gpu.py: {workload.key} has no {SMOKE_SUFFIX} member for --cpu-smoke")
    return tiers[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", metavar="KEY,...", help="only these benchmarks (MLPerf keys: gpt3, bert, ...)")
    p.add_argument("--skip", metavar="KEY,...", help="leave these benchmarks out")
    p.add_argument("--seconds-per-benchmark", type=float, default=20.0,
                   help="time budget of a benchmark's steps (warm-up and timed), its setup not counted")
    p.add_argument("--max-minutes", type=float, default=7.5,
                   help="skip the benchmarks left once less than twice a benchmark's budget remains of this")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before the timed ones")
    p.add_argument("--max-steps", type=int, default=20, help="timed steps at most")
    p.add_argument("--batches", type=int, default=2, help="distinct batches kept on the device and cycled")
    p.add_argument("--json", type=Path, default=None, help="where the figures go (default: $OUT or here)")
    p.add_argument("--data-dir", type=Path, help="keep the made-up data here and reuse it on a rerun")
    p.add_argument("--published", type=Path, help="per-GPU published rates saved by --save-published")
    p.add_argument("--save-published", type=Path, metavar="FILE", help="write the published rates and exit")
    p.add_argument("--report", type=Path, metavar="RUN_JSON", help="print a run's table again, with the rates here")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="each benchmark's -tiny tier on CPU, fp32, 1 warm-up and 1 timed step (CI)")
    p.add_argument("--fp8", action="store_true",
                   help="also time each benchmark that declares its own --fp8 flag with it on, beside its bf16 row "
                        "in the same run, and give the rate fp8 / bf16 (needs an FP8 GPU: compute capability 8.9+)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile every row's model, as `trainclock run --compile` (fp8's casts are fused only so)")
    args = p.parse_args()

    if args.save_published:
        rates, source = load_published(None)
        if not rates:
            sys.exit(f"mlperf_steps_gpu.py: published rates {source}")
        args.save_published.write_text(json.dumps(rates, indent=1) + "\n")
        print(f"published per-GPU rates of {len(rates)} benchmarks written to {args.save_published}")
        return
    if args.report:
        report = json.loads(args.report.read_text())
        published, report["published_source"] = load_published(args.published)
        attach_published(report["rows"], published)
        render(report)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1) + "\n")
        return

    if args.cpu_smoke and args.fp8:
        sys.exit("mlperf_steps_gpu.py: --fp8 times FP8 matmuls, which need a GPU; drop it with --cpu-smoke")
    if args.cpu_smoke:
        device, precision = torch.device("cpu"), "fp32"
        args.warmup, args.max_steps = 1, 1
    else:
        if not torch.cuda.is_available():
            sys.exit("mlperf_steps_gpu.py: no CUDA device here; run it on a GPU machine (or --cpu-smoke)")
        device, precision = torch.device("cuda"), "bf16"
    workloads = selected(args.only, args.skip)
    started = time.perf_counter()
    # the denominator of MFU, measured on this device in the run's precision (a datasheet's is not)
    peak = (matmul_peak_flops(device, DTYPES[precision], size=8192, seconds=2.0) if device.type == "cuda"
            else matmul_peak_flops(device, DTYPES[precision]))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}, {precision}: matmul peak measured {peak / 1e12:,.1f} TFLOP/s",
          flush=True)
    published, published_source = ({}, "not used (--cpu-smoke)") if args.cpu_smoke else load_published(args.published)

    path = args.json or default_json()
    temporary = None
    root = args.data_dir
    if root is None and not args.cpu_smoke:
        root = temporary = Path(tempfile.mkdtemp(prefix="trainclock-steps-", dir=scratch_root()))
    rows: list[dict] = []

    def report() -> dict:
        attach_published(rows, published)
        return {"device": name, "torch": torch.__version__, "precision": precision, "peak_flops": peak,
                "mode": "cpu-smoke" if args.cpu_smoke else "gpu", "gpus_per_node": GPUS_PER_NODE,
                "seconds_total": time.perf_counter() - started, "published_source": published_source,
                "imported_distributions": imported_distributions(), "rows": rows}

    try:
        for workload in workloads:
            member = smallest_tier(workload) if args.cpu_smoke else workload.full_size
            variants: list[tuple[str, ...]] = [()]
            if args.fp8 and FP8_FLAG in workload_flags(workload):
                variants.append((FP8_FLAG,))
            base: dict | None = None  # this benchmark's default row, which a variant's rate is compared with
            for on in variants:
                left = 60 * args.max_minutes - (time.perf_counter() - started)
                # a benchmark takes its step budget and about as much again to write its data and build
                if not args.cpu_smoke and left < 2 * args.seconds_per_benchmark:
                    rows.append({"benchmark": workload.key, "member": member, "variant": "+".join(on) or None,
                                 "status": "skipped", "error": f"{left:.0f} s left of --max-minutes {args.max_minutes}"})
                    continue
                label = " ".join((member, *on))
                print(f"{workload.key}: {label} ...", flush=True)  # where a run killed at its time limit was
                row = measure_row(workload, member, args, device, precision, peak, root, on)
                if on:
                    compare_with_default(row, base)
                else:
                    base = row
                rows.append(row)
                print(f"{workload.key}: {label}: {row['status']}"
                      + (f", {row['units_per_s']:,.1f} {row['unit']}/s per GPU" if row["status"] == "ok" else
                         f": {row.get('error', '')}") + f" ({row['seconds']:.1f} s)", flush=True)
                path.write_text(json.dumps(report(), indent=1) + "\n")  # a run stopped later keeps these rows
            if root is not None and args.data_dir is None:  # the made-up data of every variant's row: gone now
                shutil.rmtree(root / member, ignore_errors=True)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    final = report()
    path.write_text(json.dumps(final, indent=1) + "\n")
    print()
    render(final)
    print(f"imported beside torch: {', '.join(final['imported_distributions']) or 'nothing'}; "
          f"{final['seconds_total']:.0f} s in all")
    print(f"figures written to {path}")

if __name__ == "__main__":
    main()
