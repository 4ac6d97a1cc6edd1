"""One benchmark run, MLPerf style: init (untimed) -> run_start -> train to target -> run_stop,
written into an official result tree:

  <out>/results/<system>/<workload>/result_<i>.txt            the MLPerf log
  <out>/results/<system>/<workload>/result_<i>.metrics.jsonl  per-step metrics for plots
  <out>/systems/<system>.json                                 the system description
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import UsageError
from trainclock.mllog import RunLog
from trainclock.mllog.reader import read_events
from trainclock.review.time_to_train import time_to_train_ms
from trainclock.storage import atomic_write_text
from trainclock.train import system
from trainclock.train.job import TrainJob
from trainclock.train.loop import TrainOptions, TrainOutcome, train, warm_up
from trainclock.train.peak import matmul_peak_flops
from trainclock.train.progress import TrainProgress

import torch


@dataclass(frozen=True)
class RunRequest:
    workload: str
    out: Path
    seed: int
    options: TrainOptions
    org: str = "trainclock"
    status: str = "onprem"  # MLPerf submission_status: onprem, cloud, preview, research
    system_name: str | None = None
    progress: bool = True


@dataclass(frozen=True)
class RunResult:
    log_path: Path
    metrics_path: Path
    system_path: Path
    outcome: TrainOutcome
    time_to_train_s: float
    tokens_per_s: float  # training throughput, evaluation excluded
    achieved_flops: float
    peak_flops: float  # measured matmul peak of this machine in the run's precision

    @property
    def mfu(self) -> float:
        return self.achieved_flops / self.peak_flops


def execute(request: RunRequest, prepare: Callable[[], TrainJob]) -> RunResult:
    """Run a benchmark. `prepare` loads data and builds the model; it runs inside init."""
    device = request.options.device
    system_name = request.system_name or system.default_system_name(device)
    results_dir = request.out / "results" / system_name / request.workload
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        log_path = _reserve_result_path(results_dir)
    except OSError as e:
        raise UsageError(f"cannot write to output directory {request.out}: {e.strerror}; choose another with --out") from None

    log = RunLog(log_path)
    log.start("init_start")
    try:
        job = prepare()
        _log_header(log, job, request, system_name)
        dtype = torch.bfloat16 if request.options.precision == "bf16" else torch.float32
        peak = matmul_peak_flops(device, dtype)
        warm_up(job, request.options)
        log.end("init_stop")
    except BaseException:
        log.discard()
        raise

    system_path = request.out / "systems" / f"{system_name}.json"
    description = system.describe(system_name, device, request.org, job.division, request.status)
    atomic_write_text(system_path, json.dumps(description, indent=2) + "\n")

    metrics_path = log_path.with_name(log_path.stem + ".metrics.jsonl")
    total = request.options.max_samples or job.max_samples
    with open(metrics_path, "w") as metrics, TrainProgress(total, job.target, enabled=request.progress) as progress:
        outcome = train(job, request.options, log, metrics, progress)
    log.finish()

    events, _ = read_events(log_path)
    tokens_per_s = outcome.tokens / outcome.train_seconds if outcome.train_seconds else 0.0
    achieved = outcome.samples * job.flops_per_sample / outcome.train_seconds if outcome.train_seconds else 0.0
    return RunResult(log_path, metrics_path, system_path, outcome, time_to_train_ms(events) / 1000,
                     tokens_per_s, achieved, peak)


def _reserve_result_path(folder: Path) -> Path:
    """The next free result_<i>.txt, claimed through its .partial file so that concurrent
    runs never share an index."""
    i = 0
    while True:
        path = folder / f"result_{i}.txt"
        if not path.exists():
            try:
                os.close(os.open(path.with_name(path.name + ".partial"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                return path
            except FileExistsError:
                pass
        i += 1


def _log_header(log: RunLog, job: TrainJob, request: RunRequest, system_name: str) -> None:
    log.event("submission_benchmark", job.mlperf_benchmark)
    log.event("submission_org", request.org)
    log.event("submission_division", job.division)
    log.event("submission_status", request.status)
    log.event("submission_platform", system_name)
    log.event("trainclock_workload", job.workload)
    log.event("cache_clear", True)
    log.event("seed", request.seed)
    log.event("global_batch_size", job.global_batch_size)
    log.event("gradient_accumulation_steps", job.accumulation_steps)
    o = job.optim
    for key, value in [
        ("opt_name", "adam"),
        ("opt_base_learning_rate", o.learning_rate),
        ("opt_end_learning_rate", o.end_learning_rate),
        ("opt_learning_rate_warmup_steps", o.warmup_steps),
        ("opt_learning_rate_decay_steps", o.decay_steps),
        ("opt_learning_rate_decay_schedule", "cosine with linear warmup"),
        ("opt_adam_beta_1", o.beta1),
        ("opt_adam_beta_2", o.beta2),
        ("opt_adam_epsilon", o.eps),
        ("opt_weight_decay", o.weight_decay),
        ("opt_gradient_clip_norm", o.gradient_clip_norm),
    ]:
        log.event(key, value)
    for key, value in job.log_keys.items():
        log.event(key, value)
    log.event("eval_samples", job.eval_samples)
    log.event("trainclock_target", job.target, metadata={"metric": job.metric_name})
    log.event("trainclock_precision", request.options.precision)
    log.event("trainclock_compile", request.options.compile)
