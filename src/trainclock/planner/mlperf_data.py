"""The published MLPerf data the planner calibrates on: a benchmark's results table (MLPerf GPT-3's
is the one published), the reference convergence points, and the timings of evaluations and steps
read from result logs.

The data live in a folder laid out as shared/mlperf-results (gpt3_results_calibration.csv,
rcps/, v3.x/ result trees): given with --mlperf-results, or $TRAINCLOCK_MLPERF_RESULTS, or found
as shared/mlperf-results beside a checkout of this repository."""

from __future__ import annotations

import csv
import os
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import DataError
from trainclock.mllog.reader import read_events

ENV_VAR = "TRAINCLOCK_MLPERF_RESULTS"
RESULTS_CSV = "gpt3_results_calibration.csv"


def results_dir(explicit: Path | None = None) -> Path:
    if explicit is not None:
        candidates = [Path(explicit)]
    elif os.environ.get(ENV_VAR):
        candidates = [Path(os.environ[ENV_VAR])]
    else:
        candidates = [parent / "shared" / "mlperf-results" for parent in Path(__file__).resolve().parents]
    for folder in candidates:
        if (folder / RESULTS_CSV).is_file():
            return folder
    where = candidates[0] if len(candidates) == 1 else "shared/mlperf-results beside the repository"
    raise DataError(f"no {RESULTS_CSV} in {where}; pass --mlperf-results DIR (a folder laid out as "
                    f"shared/mlperf-results) or set {ENV_VAR}")


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
    run_units: tuple[int, ...]  # progress to target of each run, in the benchmark's unit (GPT-3: tokens)
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
    path = folder / RESULTS_CSV
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
    """Evaluation and training-step times measured in a result folder's logs."""

    folder: Path
    runs: int
    evaluations: int  # over all runs
    mean_eval_s: float  # eval_stop - eval_start
    mean_step_s: float  # (run time - evaluation time) / optimizer steps
    global_batch_size: int
    gradient_accumulation_steps: int | None


def log_timing(folder: Path, units_per_sample: float) -> LogTiming:
    """Times in the result logs of `folder`, whose eval_accuracy epoch_num counts progress units
    (`units_per_sample` per sample)."""
    logs = sorted(folder.glob("result_*.txt"))
    if not logs:
        raise DataError(f"no result_*.txt logs in {folder}")
    eval_seconds, step_seconds, batches, accumulation = [], [], set(), set()
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
        durations = _eval_durations(by_key["eval_start"], by_key["eval_stop"], path)
        eval_seconds.extend(durations)
        step_seconds.append(((stop - start) / 1000 - sum(durations)) / (units / (gbs * units_per_sample)))
        batches.add(gbs)
        accumulation.update(int(e.value) for e in by_key["gradient_accumulation_steps"])
    if len(batches) != 1 or len(accumulation) > 1:
        raise DataError(f"the logs in {folder} disagree on global_batch_size or gradient_accumulation_steps")
    return LogTiming(folder=folder, runs=len(logs), evaluations=len(eval_seconds),
                     mean_eval_s=statistics.fmean(eval_seconds), mean_step_s=statistics.fmean(step_seconds),
                     global_batch_size=batches.pop(), gradient_accumulation_steps=accumulation.pop() if accumulation else None)


def _eval_durations(starts: list, stops: list, path: Path) -> list[float]:
    """Each evaluation's length in seconds. Several ranks may log the same evaluation: events are
    grouped by their epoch_num (progress) and the group's earliest start and latest stop kept."""
    first_start, last_stop = {}, {}
    for e in starts:
        tag = e.metadata.get("epoch_num")
        first_start[tag] = min(first_start.get(tag, e.time_ms), e.time_ms)
    for e in stops:
        tag = e.metadata.get("epoch_num")
        last_stop[tag] = max(last_stop.get(tag, e.time_ms), e.time_ms)
    if not first_start or set(first_start) != set(last_stop) or None in first_start:
        raise DataError(f"{path}: eval_start and eval_stop do not pair up by epoch_num")
    return [(last_stop[t] - first_start[t]) / 1000 for t in first_start]
