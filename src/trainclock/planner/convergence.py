"""Tokens a run needs to reach its quality target, as a function of the global batch size.

gpt3-175b: MLPerf's reference convergence points (rcps/training_<round>/rcps_gpt3.json), the
mean tokens of reference runs at each batch size, interpolated linearly between batch sizes as
MLPerf's RCP checker does. trainclock's own members: the tokens at which each recorded reference
run (workloads/gpt3/targets/<member>.json) first reached the target, at the spec's batch size.
A run stops at the first evaluation past the target, so the tokens round up to a whole number
of evaluation intervals."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainclock.errors import DataError, UsageError
from trainclock.workloads.gpt3.spec import GPT3Spec, target_evidence


@dataclass(frozen=True)
class ConvergenceModel:
    member: str
    points: tuple[tuple[int, float], ...]  # (global batch size, mean tokens to target), sorted
    source: str

    @property
    def batch_range(self) -> tuple[int, int]:
        return self.points[0][0], self.points[-1][0]

    def tokens_needed(self, global_batch_size: int) -> float:
        low, high = self.batch_range
        if not low <= global_batch_size <= high:
            span = f"global batch size {low}" if low == high else f"global batch sizes {low} to {high}"
            raise UsageError(f"{self.member}'s convergence data ({self.source}) cover only {span}; "
                             f"choose --gbs there, or give --tokens N to set the tokens to train")
        sizes, tokens = zip(*self.points)
        return float(np.interp(global_batch_size, sizes, tokens))

    def tokens_to_target(self, global_batch_size: int, interval_tokens: int) -> int:
        needed = self.tokens_needed(global_batch_size)
        return math.ceil(needed / interval_tokens - 1e-9) * interval_tokens


def eval_interval_tokens(spec: GPT3Spec, global_batch_size: int) -> int:
    """Tokens between evaluations: every eval_every_samples sequences, at whole steps."""
    steps = math.ceil(spec.eval_every_samples / global_batch_size)
    return steps * global_batch_size * spec.seq_len


def load_convergence(spec: GPT3Spec, mlperf_dir: Callable[[], Path]) -> ConvergenceModel:
    """The member's convergence model; `mlperf_dir` locates the MLPerf data when it is needed."""
    if spec.target_source.startswith("mlperf"):
        return _from_rcps(spec, mlperf_dir())
    runs = None
    if spec.target_source.startswith("measured"):
        evidence = target_evidence(spec.name)
        runs = evidence.get("runs") if isinstance(evidence, dict) else None
    if not runs:
        raise UsageError(f"no convergence data for {spec.name}: its target is {spec.target_source.split(':')[0]} "
                         f"and no reference runs are recorded; give --tokens N to set the tokens to train")
    reached = []
    for run in runs:
        try:
            reached.append(next(tokens for _t, tokens, loss in run["evals"] if loss <= spec.target_log_perplexity))
        except (KeyError, TypeError, ValueError, StopIteration):
            raise DataError(f"targets/{spec.name}.json: a reference run (seed {run.get('seed')}) has no evaluation "
                            f"at or below the target {spec.target_log_perplexity}") from None
    return ConvergenceModel(spec.name, ((spec.global_batch_size, float(statistics.median(reached))),),
                            f"median of {len(reached)} trainclock reference runs")


def _from_rcps(spec: GPT3Spec, folder: Path) -> ConvergenceModel:
    files = sorted((folder / "rcps").glob(f"training_*/rcps_{spec.mlperf_benchmark}.json"),
                   key=lambda p: tuple(int(x) for x in p.parent.name.removeprefix("training_").split(".")))
    if not files:
        raise DataError(f"no rcps/training_*/rcps_{spec.mlperf_benchmark}.json in {folder}")
    path = files[-1]  # the latest round's
    try:
        table = json.loads(path.read_text())
        points = sorted((int(p["BS"]), statistics.fmean(p["Epochs to converge"])) for p in table.values())
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: unreadable reference convergence points ({e})") from None
    return ConvergenceModel(spec.name, tuple(points), f"MLPerf RCPs {path.parent.name}")
