"""One benchmark run, MLPerf style: init (untimed) -> run_start -> train to target -> run_stop,
on one process or as one rank of a torchrun group, written into an official result tree:

  <out>/results/<system>/<workload>/result_<i>.txt            the MLPerf log (rank 0 writes it)
  <out>/results/<system>/<workload>/result_<i>.metrics.jsonl  per-step metrics for plots
  <out>/systems/<system>.json                                 the system description
  <out>/checkpoints/<system>/<workload>/result_<i>/step_<N>/  sharded checkpoints (when enabled)

A run resumes (`--resume`, or after torchrun restarts a failed worker group) from the newest
intact checkpoint of the newest unfinished result: the log and metrics continue from where that
checkpoint left them, and the clock keeps running through the outage (wall time, as MLPerf).
A damaged checkpoint (a file whose sha256 or size differs from the one saved, log offsets
past the files) is reported in one line and skipped for the one before it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch.distributed.checkpoint.api import CheckpointException

from trainclock.device import system
from trainclock.device.peak import DTYPES, matmul_peak_flops, resolve_precision
from trainclock.distributed import env as dist_env
from trainclock.distributed.checkpoint import Checkpointer, ModelSnapshots, newest_intact, read_meta, step_folders
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.errors import DataError, ResourceError, UsageError, file_error
from trainclock.mllog import NullLog, RunLog
from trainclock.mllog.reader import read_events
from trainclock.mllog.time_to_train import time_to_train_ms
from trainclock.storage import atomic_write_text
from trainclock.train.loop import LoopState, TrainOutcome, train
from trainclock.train.options import TrainOptions
from trainclock.train.progress import TrainProgress
from trainclock.train.step import local_micro_batch, warm_up
from trainclock.workload.base import QualityTarget, RunSettings, RunSpec, TrainJob, Workload


@dataclass(frozen=True)
class RunRequest:
    """Everything a run needs, resolved once by the command."""

    workload: Workload
    spec: RunSpec  # the member, resolved against the settings and the layout
    settings: RunSettings
    out: Path
    seed: int | None  # None: the checkpoint's when resuming, else a fresh one (logged)
    options: TrainOptions
    layout: Layout = Layout()
    org: str = "trainclock"
    status: str = "onprem"  # MLPerf submission_status: onprem, cloud, preview, research
    system_name: str | None = None
    progress: bool = True
    resume: bool = False


@dataclass(frozen=True)
class RunResult:
    log_path: Path
    metrics_path: Path
    system_path: Path
    outcome: TrainOutcome
    time_to_train_ms: int  # run_stop - run_start, from the log
    unit: str  # the workload's progress unit (tokens, images, samples)
    units_per_s: float  # training throughput, evaluation excluded
    quality: tuple[QualityTarget, ...]
    seed: int
    achieved_flops: float
    peak_flops: float  # measured matmul peak of one process's device in the run's precision
    world_size: int

    @property
    def time_to_train_s(self) -> float:
        return self.time_to_train_ms / 1000

    @property
    def mfu(self) -> float:
        return self.achieved_flops / (self.peak_flops * self.world_size)


@dataclass(frozen=True)
class _Slot:
    """Where this run writes, decided by rank 0 and shared with every rank."""

    log_path: Path | None = None
    resume_from: Path | None = None
    seed: int | None = None
    error: str | None = None
    skipped: tuple[tuple[Path, str], ...] = ()  # newer checkpoints found damaged, with the reason


def execute(request: RunRequest) -> RunResult | None:
    """Run a benchmark. Returns the result on rank 0 and None on the other ranks."""
    env = dist_env.current()
    device = dist_env.device_for(env, request.options.device)
    dist_env.init_process_group(env, device)
    try:
        mesh = request.layout.mesh(device.type) if env.distributed else None
        ctx = ParallelContext(env, request.layout, mesh)
        # rank 0 measures and every rank trains in its choice: ranks must agree on the precision
        precision = ctx.from_main(resolve_precision(request.options.precision, device) if env.is_main else None)
        # the layout carries it to parallelize: FSDP2 all-gathers a bf16 run's parameters in bf16
        ctx = replace(ctx, layout=replace(ctx.layout, precision=precision))
        options = replace(request.options, device=device, precision=precision)
        request = replace(request, layout=ctx.layout, options=options)
        result = _execute(request, ctx)
        ctx.barrier()  # no rank tears the group down while another is still using it
        return result
    finally:
        dist_env.destroy_process_group()


def _execute(request: RunRequest, ctx: ParallelContext) -> RunResult | None:
    """The run itself, with the request's options resolved for this process (device, precision):
    open its outputs (rank 0's files, a null output elsewhere), build and warm up, start or resume,
    train, and the result."""
    place, seed, start = _claim(request, ctx)
    outputs = _Outputs(place, start) if ctx.env.is_main else _NullOutputs()
    checkpointer = Checkpointer(place.checkpoints, ctx, {"workload": request.spec.name, "seed": seed},
                                settings=_settings_record(request))
    job, optimizer, peak, state = _set_up(request, ctx, place, seed, start, outputs.log, checkpointer)
    return _train_and_finish(request, ctx, place, outputs, start, checkpointer, job, optimizer, state, peak, seed)


@dataclass(frozen=True)
class _Place:
    """Where one run writes, the same on every rank."""

    system_name: str
    log_path: Path  # result_<i>.txt (it grows as .partial)
    out: Path

    @property
    def system_path(self) -> Path:
        return self.out / "systems" / f"{self.system_name}.json"

    @property
    def checkpoints(self) -> Path:
        return self.out / "checkpoints" / self.system_name / self.log_path.parent.name / self.log_path.stem

    @property
    def metrics_path(self) -> Path:
        return self.log_path.with_name(self.log_path.stem + ".metrics.jsonl")

    @property
    def profile_path(self) -> Path:
        return self.log_path.with_name(self.log_path.stem + ".profile.json")


class _Fresh:
    """A run starting: its log opens with init_start and the header, and init_stop ends the set-up."""

    resumable = False  # nothing to continue if it fails before its first checkpoint
    log_offset = metrics_offset = None

    def open(self, log) -> None:
        log.start("init_start")

    def introduce(self, log, job: TrainJob, request: RunRequest, place: _Place, ctx: ParallelContext, seed: int,
                  peak: float) -> None:
        log_header(log, job, request, place.system_name, ctx, seed)
        log.event("trainclock_matmul_peak_flops", round(peak))
        if request.options.device.type == "cpu":  # which CPU a stored run was timed on: CPUs of one name differ (AMX or not)
            log.event("trainclock_cpu", system.cpu_identity())

    def begin(self, log, checkpointer: Checkpointer, job: TrainJob, optimizer, ctx: ParallelContext) -> LoopState | None:
        log.end("init_stop")
        return None  # the loop logs run_start

    def abandon(self, log) -> None:
        log.discard()  # a run that never started leaves no log


@dataclass(frozen=True)
class _Resume:
    """A run continuing from a checkpoint: its log and metrics continue at the checkpoint's offsets,
    and it logs that it resumed instead of a new header."""

    checkpoint: Path
    meta: dict

    resumable = True

    @property
    def log_offset(self) -> int:
        return self.meta["offsets"]["log"]

    @property
    def metrics_offset(self) -> int:
        return self.meta["offsets"]["metrics"]

    def open(self, log) -> None:
        pass

    def introduce(self, *args) -> None:
        pass

    def begin(self, log, checkpointer: Checkpointer, job: TrainJob, optimizer, ctx: ParallelContext) -> LoopState | None:
        loop_state, _ = checkpointer.load(self.checkpoint, job.model, optimizer)
        state = LoopState.from_json(loop_state)
        log.event("trainclock_resumed", state.steps, metadata={"checkpoint": str(self.checkpoint),
                                                               "restart_count": ctx.env.restart_count})
        return state

    def abandon(self, log) -> None:
        log.close()  # the .partial log stays for the next --resume


def _claim(request: RunRequest, ctx: ParallelContext) -> tuple[_Place, int, _Fresh | _Resume]:
    """Where the run writes, its seed, and whether it starts or resumes: rank 0 decides, every rank follows."""
    env = ctx.env
    system_name = request.system_name or system.default_system_name(request.options.device, per_node=env.world_size)
    results_dir = request.out / "results" / system_name / request.spec.name
    slot = ctx.from_main(_claim_slot(request, results_dir, resume=request.resume or env.restart_count > 0)
                         if env.is_main else None)
    if slot.error:
        raise UsageError(slot.error)
    start = _Resume(slot.resume_from, read_meta(slot.resume_from)) if slot.resume_from else _Fresh()
    return _Place(system_name, slot.log_path, request.out), slot.seed, start


class _Outputs:
    """What rank 0 writes: the MLPerf log, the metrics, the system description, the progress bar,
    the profile; and how each is left when the run stops early."""

    def __init__(self, place: _Place, start: _Fresh | _Resume) -> None:
        self.place = place
        self.log = RunLog(place.log_path, resume_at=start.log_offset)

    def write_system(self, request: RunRequest, job: TrainJob, ctx: ParallelContext) -> None:
        device = request.options.device
        description = system.describe(self.place.system_name, device, request.org, job.division, request.status,
                                      accelerators_per_node=ctx.env.world_size if device.type == "cuda" else 0)
        path = self.place.system_path
        try:
            atomic_write_text(path, json.dumps(description, indent=2) + "\n")
        except OSError as e:  # named by the file it makes, not the temporary it writes first
            raise OSError(e.errno, e.strerror, str(path)) from e

    def open_metrics(self, start: _Fresh | _Resume):
        return _open_metrics(self.place.metrics_path, start.metrics_offset)

    def progress(self, total: int, job: TrainJob, shown: bool) -> TrainProgress:
        return TrainProgress(total, job.quality, job.progress.unit, enabled=shown)

    @property
    def profile_trace(self) -> Path | None:  # rank 0 profiles; its trace sits beside the log
        return self.place.profile_path

    def close_interrupted(self) -> None:
        """An interrupted run with a checkpoint keeps its .partial log for --resume; without one it
        could never be continued, so its log is closed as aborted under its final name."""
        checkpoints, metrics_path = self.place.checkpoints, self.place.metrics_path
        _remove_checkpoint_temporaries(checkpoints)
        if step_folders(checkpoints):
            self.log.close()
            return
        try:
            if self.log.abort() is None:  # interrupted before run_start: nothing was timed
                metrics_path.unlink(missing_ok=True)
        except OSError:  # a full disk too: no log at all rather than one cut short
            self.log.discard()
            metrics_path.unlink(missing_ok=True)

    def close_after_disk_problem(self) -> bool:
        """After a write failed: no half-written checkpoint is left; a run with a complete checkpoint
        keeps its .partial log (resumable once there is space), any other run leaves nothing behind
        (a log cut short by a full disk is no result). True when the run can be resumed."""
        place = self.place
        _remove_checkpoint_temporaries(place.checkpoints)
        if step_folders(place.checkpoints) and self.log.partial.exists():
            self.log.close()
            return True
        self.log.discard()
        for leftover in (place.metrics_path, place.profile_path):
            leftover.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the run's checkpoint folder, if the failed save left it empty
            place.checkpoints.rmdir()
        return False

    def result(self, outcome: TrainOutcome, job: TrainJob, peak: float, seed: int, world_size: int) -> RunResult:
        """Close the log under its final name; the run's result, read from it."""
        self.log.finish()
        events, _ = read_events(self.place.log_path)
        units_per_s = outcome.units / outcome.train_seconds if outcome.train_seconds else 0.0
        achieved = outcome.samples * job.flops_per_sample / outcome.train_seconds if outcome.train_seconds else 0.0
        return RunResult(self.place.log_path, self.place.metrics_path, self.place.system_path, outcome,
                         time_to_train_ms(events), job.progress.unit, units_per_s, job.quality, seed, achieved, peak,
                         world_size)


class _NullOutputs:
    """The outputs of every rank but 0: the same interface as _Outputs, writing nothing."""

    def __init__(self) -> None:
        self.log = NullLog()

    def write_system(self, *args) -> None:
        pass

    def open_metrics(self, start):
        return open(os.devnull, "w")

    def progress(self, total: int, job: TrainJob, shown: bool) -> TrainProgress:
        return TrainProgress(total, job.quality, job.progress.unit, enabled=False)

    profile_trace = None

    def close_interrupted(self) -> None:
        pass

    def close_after_disk_problem(self) -> bool:
        return False

    def result(self, *args) -> None:
        return None


def _set_up(request: RunRequest, ctx: ParallelContext, place: _Place, seed: int, start: _Fresh | _Resume, log,
            checkpointer: Checkpointer):
    """Init, untimed: build the job and its optimizer, warm them up, then start the run or resume it.
    A failure here leaves no log behind for a fresh run and the .partial log of a resumed one."""
    device = request.options.device
    start.open(log)
    try:
        job = request.workload.build_job(request.spec, ctx, device, seed, request.settings)
        if device.type == "cuda":  # the warm-up, untimed, then pays for cuDNN's timing of each shape
            torch.backends.cudnn.benchmark = job.fixed_input_shapes
        checkpointer.identity["global_batch_size"] = job.global_batch_size
        optimizer = job.optimizer.build(job.model)
        peak = matmul_peak_flops(device, DTYPES[request.options.precision])
        start.introduce(log, job, request, place, ctx, seed, peak)
        warm_up(job, request.options, ctx, compiled=request.settings.compile)
        state = start.begin(log, checkpointer, job, optimizer, ctx)
    except BaseException as e:
        start.abandon(log)
        problem = _disk_problem(e)
        if problem is not None:
            raise _disk_error(problem, place.log_path.parent, resumable=start.resumable) from None
        raise
    return job, optimizer, peak, state


def _train_and_finish(request: RunRequest, ctx: ParallelContext, place: _Place, outputs: _Outputs | _NullOutputs,
                      start: _Fresh | _Resume, checkpointer: Checkpointer, job: TrainJob, optimizer,
                      state: LoopState | None, peak: float, seed: int) -> RunResult | None:
    """The timed part of a run, after init: train, then the result (rank 0's; None elsewhere). An
    interrupt or a full disk leaves the outputs resumable where a checkpoint allows, else removed."""
    try:
        return _train(request, ctx, place, outputs, start, checkpointer, job, optimizer, state, peak, seed)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM from a batch scheduler (the run command makes it one)
        outputs.close_interrupted()
        raise
    except BaseException as e:
        if _wraps_interrupt(e):  # a checkpoint save interrupted: torch wraps the KeyboardInterrupt
            outputs.close_interrupted()
            raise KeyboardInterrupt from None
        problem = _disk_problem(e)
        if problem is None:
            raise
        resumable = outputs.close_after_disk_problem()
        raise _disk_error(problem, place.checkpoints if _is_checkpoint_error(e) else place.log_path.parent,
                          resumable) from None


def _train(request: RunRequest, ctx: ParallelContext, place: _Place, outputs: _Outputs | _NullOutputs,
           start: _Fresh | _Resume, checkpointer: Checkpointer, job: TrainJob, optimizer, state: LoopState | None,
           peak: float, seed: int) -> RunResult | None:
    options, log = request.options, outputs.log
    outputs.write_system(request, job, ctx)
    metrics = outputs.open_metrics(start)

    def save_checkpoint(loop_state: LoopState) -> None:
        offsets = {"log": log.flush(), "metrics": _flush(metrics)}
        checkpointer.save(job.model, optimizer, loop_state.to_json(), offsets)

    if options.profile_steps and outputs.profile_trace is not None:
        options = replace(options, profile_trace=outputs.profile_trace)
        log.event("trainclock_profiled_steps", options.profile_steps)  # its times carry the profiler's cost
    total = options.max_samples or job.max_samples
    with metrics, outputs.progress(total, job, request.progress) as progress:
        outcome = train(job, optimizer, options, log, metrics, progress, ctx, state,
                        save_checkpoint if options.checkpoint_every_steps else None,
                        ModelSnapshots(place.checkpoints / "snapshots", ctx) if job.eval_schedule.offline else None)
    return outputs.result(outcome, job, peak, seed, ctx.env.world_size)


def _disk_problem(e: BaseException) -> OSError | None:
    """The full-disk or permission error behind `e`: itself, or one a checkpoint save wrapped
    (torch.distributed.checkpoint raises CheckpointException, a BaseException, for any rank's error)."""
    if isinstance(e, OSError):
        return e if file_error(e) is not None else None
    if isinstance(e, CheckpointException):
        for failure in e.failures.values():
            inner = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(inner, BaseException) and (found := _disk_problem(inner)) is not None:
                return found
    return None


def _wraps_interrupt(e: BaseException) -> bool:
    return isinstance(e, CheckpointException) and any(
        isinstance(f[0] if isinstance(f, tuple) else f, KeyboardInterrupt) for f in e.failures.values())


def _is_checkpoint_error(e: BaseException) -> bool:
    return isinstance(e, CheckpointException)


def _disk_error(e: OSError, where: Path, resumable: bool) -> ResourceError:
    hint = "; the run's last checkpoint is kept: continue it with --resume" if resumable else ""
    return ResourceError(f"{file_error(e, where, other='another --out')}{hint}")


def _remove_checkpoint_temporaries(checkpoints: Path) -> None:
    """A checkpoint save cut short leaves .step_<N>.tmp (and a snapshot's .samples_<N>.tmp): never a checkpoint."""
    for folder in (checkpoints, checkpoints / "snapshots"):
        if folder.is_dir():
            for tmp in folder.glob(".*.tmp"):
                shutil.rmtree(tmp, ignore_errors=True)


def _settings_record(request: RunRequest) -> dict:
    """What a resume without flags takes over from the checkpoint (explicit choices only)."""
    s = request.settings
    return {"data": s.data, "global_batch_size": s.global_batch_size, "micro_batch_size": s.micro_batch_size,
            "compile": s.compile, "activation_checkpointing": s.activation_checkpointing,
            "precision": request.options.precision,
            # the benchmark's own flags: JSON keeps numbers, strings, booleans and None, the rest as text
            "workload_flags": {k: v if v is None or isinstance(v, (bool, int, float, str)) else str(v)
                               for k, v in s.extra.items()}}


def resumable_settings(out: Path, system_name: str, member: str) -> dict | None:
    """The identity and settings of the run `--resume` would continue (None: there is none;
    DataError: every checkpoint of it is damaged). Reads only: the command fills the settings
    the user did not pass from these."""
    # hashing every checkpoint file once more on every rank would cost time for nothing: rank 0
    # verifies them when it claims the slot. The launcher of torchrun does, to fail with exit 2.
    slot = _resumable(out, out / "results" / system_name / member, files=not dist_env.under_torchrun())
    if slot is None:
        return None
    if slot.error:  # before torchrun starts: one line and exit 2, not a failed worker group
        raise DataError(slot.error)
    meta = read_meta(slot.resume_from)  # verified by _resumable
    return {**meta.get("settings", {}), "seed": meta["identity"].get("seed")}


def _claim_slot(request: RunRequest, results_dir: Path, resume: bool) -> _Slot:
    name = request.spec.name
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            slot = _resumable(request.out, results_dir)
            if slot and slot.error:
                return slot
            if slot:
                for path, reason in slot.skipped:
                    print(f"trainclock: checkpoint {path} is damaged ({reason}): skipped; "
                          f"resuming from {slot.resume_from.name}", file=sys.stderr, flush=True)
                stored = read_meta(slot.resume_from)["identity"].get("seed")
                return replace(slot, seed=request.seed if request.seed is not None else stored)
            if request.resume:
                others = sorted(p.parent.parent.name for p in results_dir.parent.parent.glob(f"*/{name}/result_*.txt.partial")
                                if p.parent != results_dir)
                hint = (f" (unfinished runs of {name} exist under system {', '.join(dict.fromkeys(others))}: "
                        "the default system name counts the processes; pass --system NAME to resume one)") if others else ""
                return _Slot(error=f"nothing to resume in {results_dir}: no unfinished run with a complete checkpoint{hint}; "
                                   "start a new run without --resume")
        seed = request.seed if request.seed is not None else fresh_seed()
        return _Slot(log_path=_reserve_result_path(results_dir), seed=seed)
    except OSError as e:
        return _Slot(error=f"cannot write to output directory {request.out}: {e.strerror}; choose another with --out")


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little") % (2**31)


def _resumable(out: Path, results_dir: Path, files: bool = True) -> _Slot | None:
    """The newest unfinished result (a .partial log) that has a checkpoint, and its newest
    intact checkpoint; an error when every checkpoint it has is damaged (resuming an older
    run instead would be a surprise). Rank 0 alone decides: every rank loads its choice."""
    if not results_dir.is_dir():
        return None
    system_name, workload = results_dir.parent.name, results_dir.name
    partials = sorted(results_dir.glob("result_*.txt.partial"), key=lambda p: int(p.name.split("_")[1].split(".")[0]))
    for partial in reversed(partials):
        log_path = partial.with_name(partial.name.removesuffix(".partial"))
        folder = out / "checkpoints" / system_name / workload / log_path.stem
        if not step_folders(folder):
            continue
        metrics_path = log_path.with_name(log_path.stem + ".metrics.jsonl")
        intact, damaged = newest_intact(folder, lambda meta: _offsets_damage(meta["offsets"], partial, metrics_path),
                                        files=files)
        if intact is None:
            reasons = "; ".join(f"{p.name}: {why}" for p, why in damaged)
            return _Slot(error=f"every checkpoint of {log_path.stem} in {folder} is damaged ({reasons}); nothing to resume: "
                               f"start a new run without --resume (or restore the checkpoints from a copy)")
        return _Slot(log_path=log_path, resume_from=intact, skipped=tuple(damaged))
    return None


def _offsets_damage(offsets: dict, log_partial: Path, metrics_path: Path) -> str | None:
    """Why a checkpoint's log offsets cannot be resumed at: each must be a line end within its
    file, which a resume truncates to it (past its end, truncate would pad it with zeros)."""
    for key, path in (("log", log_partial), ("metrics", metrics_path)):
        at = offsets.get(key) if isinstance(offsets, dict) else None
        if type(at) is not int or at < 0:
            return f"its {key} offset {at!r} is not a byte position"
        try:
            size = path.stat().st_size
            if at > size:
                return f"its {key} offset {at} is past the end of {path.name} ({size} bytes)"
            if at:
                with open(path, "rb") as f:
                    f.seek(at - 1)
                    if f.read(1) != b"\n":
                        return f"its {key} offset {at} is not at a line end of {path.name}"
        except FileNotFoundError:
            if at:
                return f"{path.name} is missing"
        except OSError as e:
            return f"{path.name} cannot be read: {e.strerror}"
    return None


def _open_metrics(path: Path, resume_at: int | None):
    if resume_at is None:
        return open(path, "w")
    path.touch()  # offset 0 (checkpointed before any step) is valid for a lost file too
    f = open(path, "r+")
    f.truncate(resume_at)
    f.seek(resume_at)
    return f


def _flush(stream) -> int:
    """Flush to disk; the byte size so far, where a resumed run continues the file."""
    stream.flush()
    with contextlib.suppress(OSError):  # /dev/null, on the ranks that write no metrics
        os.fsync(stream.fileno())
    return stream.tell()


def _reserve_result_path(folder: Path) -> Path:
    """The next free result_<i>.txt, claimed through its .partial file so that concurrent
    runs never share an index."""
    i = 0
    while True:
        path = folder / f"result_{i}.txt"
        if not path.exists():
            try:
                # 0o666 through the umask: a log is data (os.open defaults to 0o777, which made logs executable)
                os.close(os.open(path.with_name(path.name + ".partial"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
                return path
            except FileExistsError:
                pass
        i += 1


# the rules' names for the precisions a run computes and communicates in
_RULES_PRECISION = {"bf16": "bfloat16", "fp32": "fp32", "fp8": "fp8"}


def disclosure_keys(job: TrainJob, precision: str, ctx: ParallelContext) -> dict[str, object]:
    """The precisions, parallelism and configuration every log discloses (mandatory in the newest rounds
    on, harmless before): what its linear layers, attention and collectives run in at the lowest,
    its tensor/pipeline/context/expert split, micro-batch and configuration (the member). A header
    written before the precision is resolved ("auto": tests that write logs by hand) names none."""
    layout = ctx.layout
    keys: dict[str, object] = {}
    if precision in _RULES_PRECISION:
        # FSDP2 all-gathers a bf16 run's parameters in bf16 (distributed.parallelize); DDP reduces fp32 gradients
        comm = precision if layout.fsdp and ctx.env.world_size > 1 else "fp32"
        keys |= {"lowest_numerical_precision_in_linear": _RULES_PRECISION[job.linear_precision or precision],
                 "lowest_numerical_precision_in_attn": _RULES_PRECISION[precision],
                 "lowest_numerical_precision_in_comm": _RULES_PRECISION[comm]}
    return keys | {"tensor_parallelism": layout.tp, "pipeline_parallelism": layout.pp,
                   "context_parallelism": 1, "expert_parallelism": 1,  # trainclock splits neither context nor experts
                   "micro_batch_size": local_micro_batch(job, ctx), "config_filename": job.name}


def log_header(log: RunLog, job: TrainJob, request: RunRequest, system_name: str, ctx: ParallelContext,
               seed: int) -> None:
    log.event("submission_benchmark", job.benchmark)
    log.event("submission_org", request.org)
    log.event("submission_division", job.division)
    log.event("submission_status", request.status)
    log.event("submission_platform", system_name)
    log.event("trainclock_workload", job.name)
    log.event("trainclock_round", request.workload.mlperf_round)
    log.event("trainclock_parallel_layout", ctx.layout.describe(), metadata={"world_size": ctx.env.world_size})
    log.event("cache_clear", True)
    log.event("seed", seed)
    log.event("global_batch_size", job.global_batch_size)
    log.event("gradient_accumulation_steps", job.global_batch_size // ctx.dp_size // local_micro_batch(job, ctx))
    for key, value in disclosure_keys(job, request.options.precision, ctx).items():
        log.event(key, value)
    for key, value in job.optimizer.log_keys().items():
        log.event(key, value)
    for key, value in job.log_keys.items():
        log.event(key, value)
    log.event("eval_samples", job.eval_samples)
    for target in job.quality:
        log.event("trainclock_target", target.threshold, metadata={"metric": target.metric, "direction": target.direction})
    key, unit, metadata = job.progress.codec.header()  # how the log's counts are written (mllog.progress)
    log.event(key, unit, metadata=metadata)
    log.event("trainclock_precision", request.options.precision)
    # intra-op threads per process: a CPU run's speed depends on them, and a plan for this CPU must match them
    log.event("trainclock_threads", torch.get_num_threads())
    log.event("trainclock_compile", request.settings.compile)
