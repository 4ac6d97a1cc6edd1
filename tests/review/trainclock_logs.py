"""Writes logs exactly as trainclock's runs do (its MLLOG writer and its run header), with chosen
times and evaluations, and edits them into broken ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from trainclock.distributed.context import single_process
from trainclock.mllog import RunLog
from trainclock.device import system
from trainclock.train.options import TrainOptions
from trainclock.train.run import RunRequest, log_header
from trainclock.workload.base import RunSettings, TrainJob
from trainclock.workloads.gpt3 import WORKLOAD as GPT3
from trainclock.workloads.gpt3.workload import gpt3_job
from trainclock.workloads.gpt3.spec import get_member

SYSTEM = "cpu-box"
WORKLOAD = "gpt3-tiny"
START_MS = 1_800_000_000_000  # run_start of every written run


def tiny_job(division: str = "open") -> TrainJob:
    spec = get_member(WORKLOAD)
    job = gpt3_job(spec, torch.nn.Identity(), None, None, None, dataset="test-corpus", eval_sequences=64)
    job.division = division
    return job


def target() -> float:
    return get_member(WORKLOAD).quality[0].threshold


def write_log(path: Path, minutes: float, evals: list[float] | None = None, status: str = "success",
              division: str = "open") -> Path:
    """A run that evaluates as the tier does (its eval_every_samples) and stops after `minutes`;
    by default its second evaluation reaches the target."""
    job = tiny_job(division)
    evals = evals if evals is not None else [target() + 1.0, target() - 0.1]
    path.parent.mkdir(parents=True, exist_ok=True)
    log = RunLog(path)
    log.start("init_start")
    # the header of a real run, written by the run's own code: a change to it meets these tests
    log_header(log, job, RunRequest(workload=GPT3, spec=get_member(WORKLOAD), settings=RunSettings(), out=path.parent,
                                     seed=1, options=TrainOptions(device=torch.device("cpu"))), SYSTEM, single_process(),
               seed=1)
    log.end("init_stop")
    log.start("run_start", time_ms=START_MS)
    stop_ms = START_MS + round(minutes * 60_000)
    for i, value in enumerate(evals, 1):
        tokens = i * job.eval_schedule.every * job.progress.units_per_sample
        at = START_MS + (stop_ms - START_MS) * i // len(evals)
        log.start("block_start", metadata={"first_epoch_num": tokens - job.eval_schedule.every * job.progress.units_per_sample,
                                           "epoch_count": job.eval_schedule.every * job.progress.units_per_sample}, time_ms=at - 2)
        log.end("block_stop", metadata={"first_epoch_num": tokens}, time_ms=at - 1)
        log.start("eval_start", metadata={"epoch_num": tokens}, time_ms=at - 1)
        log.event("eval_accuracy", value, metadata={"epoch_num": tokens}, time_ms=at)
        log.end("eval_stop", metadata={"epoch_num": tokens}, time_ms=at)
    log.event("train_samples", len(evals) * job.eval_schedule.every * job.progress.units_per_sample, time_ms=stop_ms)
    log.end("run_stop", metadata={"status": status}, time_ms=stop_ms)
    return log.finish()


def write_tree(root: Path, minutes: list[float], **log_options) -> Path:
    """<root>/results/<system>/gpt3-tiny/result_<i>.txt and <root>/systems/<system>.json."""
    folder = root / "results" / SYSTEM / WORKLOAD
    for i, m in enumerate(minutes):
        write_log(folder / f"result_{i}.txt", m, **log_options)
    description = system.describe(SYSTEM, torch.device("cpu"), "trainclock", "open", "onprem")
    (root / "systems").mkdir(parents=True, exist_ok=True)
    (root / "systems" / f"{SYSTEM}.json").write_text(json.dumps(description))
    return root


def edit_lines(path: Path, edit: Callable[[list[dict]], list[dict]]) -> Path:
    """Rewrite a log through `edit`, which gets and returns its records (parsed :::MLLOG lines)."""
    records = [json.loads(line.split(":::MLLOG", 1)[1]) for line in path.read_text().splitlines()]
    path.write_text("".join(f":::MLLOG {json.dumps(r)}\n" for r in edit(records)))
    return path


def without(key: str) -> Callable[[list[dict]], list[dict]]:
    return lambda records: [r for r in records if r["key"] != key]


def changed(key: str, **fields) -> Callable[[list[dict]], list[dict]]:
    return lambda records: [{**r, **fields} if r["key"] == key else r for r in records]
