"""How fast `trainclock review` checks and scores MLPerf logs: logs/s and MB/s on the real logs of
shared/mlperf-results, and on a larger tree made of copies of them (each organization folder
copied under new names, so every copy is reviewed as an entry of its own).

  python benchmarks/review_speed.py [--shared PATH] [--copies 10] [--repeat 5] [--official]

Figures printed:
  cold   a fresh Python process reviewing all of shared/ (imports included), as the CLI does
  warm   review_path(shared) again in a warm process (rules compiled, references computed), best of --repeat
  large  review_path of the replicated tree, best of --repeat
  official (with --official) mlperf_logging's own checker + summarizer scoring on shared/, for scale
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainclock.review.tree import review_path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "mlperf-results"


def logs_and_bytes(root: Path) -> tuple[int, int]:
    logs = list(root.rglob("result_*.txt"))
    return len(logs), sum(p.stat().st_size for p in logs)


def best_of(repeat: int, work) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def replicate(shared: Path, into: Path, copies: int) -> Path:
    for k in range(copies):
        for org in shared.glob("v*/*"):
            if (org / "results").is_dir():
                shutil.copytree(org, into / org.parent.name / f"{org.name}-copy{k}")
    return into


def cold_seconds(shared: Path) -> float:
    code = f"from pathlib import Path; from trainclock.review.tree import review_path; review_path(Path({str(shared)!r}))"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def official_seconds(shared: Path) -> float:
    import logging

    from mlperf_logging.result_summarizer import result_summarizer

    logging.disable(logging.CRITICAL)
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # it prints its notices
        for folder in shared.glob("v*/*/results/*/*"):
            round_ = folder.relative_to(shared).parts[0][1:] + ".0"
            result_summarizer._compute_strong_score_standalone(folder.name, None, False, str(folder), "training", round_)
    return time.perf_counter() - start


def report(label: str, seconds: float, logs: int, size: int) -> None:
    print(f"{label:<9} {seconds * 1000:9.1f} ms  {logs:5d} logs  {size / 1e6:7.1f} MB  "
          f"{logs / seconds:8.0f} logs/s  {size / 1e6 / seconds:7.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the MLPerf result logs (default: %(default)s)")
    parser.add_argument("--copies", type=int, default=10, help="copies of shared/ in the large tree")
    parser.add_argument("--repeat", type=int, default=5, help="timings per figure; the best is printed")
    parser.add_argument("--official", action="store_true", help="also time mlperf_logging's checker and summarizer")
    args = parser.parse_args()
    shared = args.shared.resolve()
    logs, size = logs_and_bytes(shared)

    report("cold", cold_seconds(shared), logs, size)
    review_path(shared)  # compile the rules and compute the reference statistics once
    report("warm", best_of(args.repeat, lambda: review_path(shared)), logs, size)
    with tempfile.TemporaryDirectory() as tmp:
        large = replicate(shared, Path(tmp), args.copies)
        large_logs, large_size = logs_and_bytes(large)
        entries = len(review_path(large))
        report("large", best_of(args.repeat, lambda: review_path(large)), large_logs, large_size)
        print(f"          ({entries} entries in the large tree)")
    if args.official:
        report("official", official_seconds(shared), logs, size)


if __name__ == "__main__":
    main()
