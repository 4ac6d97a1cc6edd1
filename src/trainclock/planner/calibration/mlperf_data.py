"""The published MLPerf data the planner calibrates on: the results table of the benchmark
submissions.toml names, the reference convergence points, and the timings of evaluations and
steps read from result logs.

The data live in a folder laid out as shared/mlperf-results (<benchmark>_results_calibration.csv,
rcps/, vX.Y/ result trees): given with --mlperf-results, or $TRAINCLOCK_MLPERF_RESULTS, or found
as shared/mlperf-results beside a checkout of this repository."""

from __future__ import annotations

import csv
import os
import statistics
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from trainclock.errors import DataError
from trainclock.mllog.reader import read_events
from trainclock.mllog.time_to_train import eval_spans

ENV_VAR = "TRAINCLOCK_MLPERF_RESULTS"
SUBMISSIONS = "planner/calibration/submissions.toml"


@cache
def submissions() -> dict:
    """submissions.toml: the benchmark the results table is about, and how each stack ran."""
    try:
        return tomllib.loads((resources.files("trainclock.planner.calibration") / "submissions.toml").read_text())
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"{SUBMISSIONS} is malformed ({e}); fix the file") from None


def table_benchmark() -> str:
    """The MLPerf benchmark whose results table and logs this source calibrates on (the one
    submissions.toml names); published_scores leaves its entries to this source."""
    try:
        return submissions()["benchmark"]
    except KeyError:
        raise DataError(f"{SUBMISSIONS} is incomplete: it names the benchmark its table is about") from None


def results_csv() -> str:
    """The results table's file name in the data folder: that benchmark's calibration table."""
    return f"{table_benchmark()}_results_calibration.csv"


def table_title() -> str:
    """How tables name that benchmark (submissions.toml's title, else its key)."""
    return str(submissions().get("title", table_benchmark()))


def shared_folder(explicit: Path | None, env_var: str, shared_name: str, marker: str) -> tuple[Path | None, str]:
    """The folder holding `marker`: the explicit one, else $env_var, else shared/<shared_name> beside
    the repository (or an installed copy's parents); (None, where it looked) when none has it."""
    if explicit is not None:
        candidates = [Path(explicit)]
    elif os.environ.get(env_var):
        candidates = [Path(os.environ[env_var])]
    else:
        candidates = [parent / "shared" / shared_name for parent in Path(__file__).resolve().parents]
    for folder in candidates:
        if (folder / marker).is_file():
            return folder, ""
    return None, str(candidates[0]) if len(candidates) == 1 else f"shared/{shared_name} beside the repository"


def results_dir(explicit: Path | None = None) -> Path:
    folder, where = shared_folder(explicit, ENV_VAR, "mlperf-results", results_csv())
    if folder is None:
        raise DataError(f"no {results_csv()} in {where}; pass --mlperf-results DIR (a folder laid out as "
                        f"shared/mlperf-results) or set {ENV_VAR}")
    return folder


@dataclass(frozen=True)
class PublishedEntry:
    """One row of the results table: a submitted system's result."""

    round: str
    submitter: str
    system: str
    accelerator_model: str
    accelerators: int
    global_batch_size: int
    framework: str
    run_minutes: tuple[float, ...]
    run_units: tuple[int, ...]  # progress to target of each run, in the benchmark's progress unit
    score_minutes: float  # the official score: olympic mean of the runs

    @property
    def key(self) -> str:
        return f"v{self.round}/{self.system}"

    @property
    def scored_run_units(self) -> int:
        """Progress made by the run the score equals: the olympic mean of three runs drops the
        fastest and slowest, so the score is the middle run's time."""
        closest = min(range(len(self.run_minutes)), key=lambda i: abs(self.run_minutes[i] - self.score_minutes))
        return self.run_units[closest]


def read_published(folder: Path) -> list[PublishedEntry]:
    path = folder / results_csv()
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except UnicodeDecodeError:
        raise DataError(f"{path} is not UTF-8 text: it should be the CSV shipped in shared/mlperf-results") from None
    except csv.Error as e:
        raise DataError(f"{path} is not a readable CSV ({e}): it should be the one shipped in "
                        "shared/mlperf-results") from None
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from None
    entries = []
    for line, row in enumerate(rows, 2):
        try:
            runs = sorted(k for k in row if k.startswith("run_") and k.endswith("_minutes"))
            entries.append(PublishedEntry(
                round=row["round"], submitter=row["submitter"], system=row["system_name"],
                accelerator_model=row["accelerator_model_name"], accelerators=int(row["accelerators_count"]),
                global_batch_size=int(row["global_batch_size"]), framework=row["framework"],
                run_minutes=tuple(float(row[k]) for k in runs),
                run_units=tuple(int(row[k.replace("_minutes", "_tokens_to_target")]) for k in runs),
                score_minutes=float(row["official_score_minutes"]),
            ))
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"{path}:{line}: unreadable row ({type(e).__name__}: {e}); the columns are those of "
                            f"the file shipped in shared/mlperf-results") from None
    if not entries:
        raise DataError(f"{path} has no results")
    return entries


@dataclass(frozen=True)
class LogTiming:
    """A result folder's timed region, part by part (means over its runs): training steps,
    evaluations, and what remains (start-up inside the timed region, the first steps' warm-up
    beyond a steady step, checkpoints)."""

    folder: Path
    runs: int
    evaluations: int  # over all runs
    mean_eval_s: float  # eval_stop - eval_start
    mean_step_s: float  # a steady optimizer step: the training between two evaluations over its steps (median)
    global_batch_size: int
    gradient_accumulation_steps: int | None
    mean_units: float = 0.0  # progress to the last evaluation, per run
    mean_run_s: float = 0.0  # run_stop - run_start, per run
    mean_evals_s: float = 0.0  # all evaluations of a run
    units_per_sample: float = 1.0

    @property
    def steps(self) -> float:
        """Optimizer steps of a mean run (its progress over the units a step trains)."""
        return self.mean_units / self._units_per_step

    @property
    def mean_train_s(self) -> float:
        """Training of a mean run at the steady step time."""
        return self.steps * self.mean_step_s

    @property
    def mean_remainder_s(self) -> float:
        """The timed region that is neither steady training nor evaluation."""
        return self.mean_run_s - self.mean_train_s - self.mean_evals_s

    @property
    def _units_per_step(self) -> float:
        return self.global_batch_size * self.units_per_sample


def log_timing(folder: Path, units_per_sample: float) -> LogTiming:
    """Times in the result logs of `folder`, whose eval_accuracy epoch_num counts progress units
    (`units_per_sample` per sample)."""
    logs = sorted(folder.glob("result_*.txt"))
    if not logs:
        raise DataError(f"no result_*.txt logs in {folder}")
    eval_seconds, steady_steps, run_seconds, run_units, run_evals = [], [], [], [], []
    batches, accumulation = set(), set()
    for path in logs:
        events, _malformed = read_events(path)
        by_key = defaultdict(list)
        for e in events:
            by_key[e.key].append(e)
        try:
            start = min(e.time_ms for e in by_key["run_start"])
            stop = max(e.time_ms for e in by_key["run_stop"])
            gbs = int(by_key["global_batch_size"][0].value)
            units = max(int(e.metadata["epoch_num"]) for e in by_key["eval_accuracy"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise DataError(f"{path}: needs run_start, run_stop, global_batch_size and eval_accuracy with "
                            f"metadata epoch_num (progress) to time its steps") from None
        spans = _eval_spans(by_key["eval_start"], by_key["eval_stop"], by_key["block_start"] + by_key["epoch_start"], path)
        durations = [(b - a) / 1000 for _, a, b in spans]
        eval_seconds.extend(durations)
        # steady training: from one evaluation's end to the next one's start, over the steps between them
        # (the first interval carries the start-up and warm-up, so it is left to the remainder)
        step_units = gbs * units_per_sample
        for (u0, _, stop0), (u1, start1, _) in zip(spans, spans[1:]):
            if u1 > u0:
                steady_steps.append((start1 - stop0) / 1000 / ((u1 - u0) / step_units))
        if len(spans) < 2:  # one evaluation: the whole run, less it, is the only measure of a step
            steady_steps.append(((stop - start) / 1000 - sum(durations)) / (units / step_units))
        run_seconds.append((stop - start) / 1000)
        run_units.append(units)
        run_evals.append(sum(durations))
        batches.add(gbs)
        accumulation.update(int(e.value) for e in by_key["gradient_accumulation_steps"])
    if len(batches) != 1 or len(accumulation) > 1:
        raise DataError(f"the logs in {folder} disagree on global_batch_size or gradient_accumulation_steps")
    return LogTiming(folder=folder, runs=len(logs), evaluations=len(eval_seconds),
                     mean_eval_s=statistics.fmean(eval_seconds), mean_step_s=statistics.median(steady_steps),
                     global_batch_size=batches.pop(), gradient_accumulation_steps=accumulation.pop() if accumulation else None,
                     mean_units=statistics.fmean(run_units), mean_run_s=statistics.fmean(run_seconds),
                     mean_evals_s=statistics.fmean(run_evals), units_per_sample=units_per_sample)


def _eval_spans(starts: list, stops: list, resumes: list, path: Path) -> list[tuple[float, int, int]]:
    spans = eval_spans(starts, stops, resumes)
    if spans is None:
        raise DataError(f"{path}: eval_start and eval_stop do not pair up by a numeric epoch_num")
    return spans
