"""Peak memory and time of `trainclock review` and `trainclock results import` as a log grows: the
reader streams, so both should stay flat while the log grows 10x. Each log is an official GPT-3 log
of shared/mlperf-results repeated until it reaches the size asked for (repeated keys, evaluations
and findings by the hundred thousand: what a log written by a stuck process looks like).

  python benchmarks/review_memory.py [--sizes 20,200] [--shared PATH] [--keep DIR]

Each command runs in a fresh process that reports its own peak resident memory (VmHWM of
/proc/self/status, Linux), so Python's allocator, SQLite's caches and the driver all count. Printed per size:
review (seconds, peak MB), import (seconds, peak MB, database MB, finding rows), and show of the
imported entry (seconds, peak MB). PYTHONPATH picks the trainclock to measure (e.g. a copy of an
older src/), so one script measures before and after a change.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "mlperf-results"
SOURCE_LOG = "v3.0/NVIDIA_CoreWeave/results/coreweave_hgxh100_n448_ngc23.04_pytorch/gpt3/result_0.txt"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        memory = int(Path("/proc/meminfo").read_text().split()[1]) / 1024**2
    except OSError:
        memory = float("nan")
    return (f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB memory; Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def write_log(source: Path, target: Path, megabytes: float) -> int:
    """`source` repeated until `target` holds at least `megabytes` MB; returns the bytes written."""
    data = source.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    copies = max(1, round(megabytes * 1e6 / len(data)))
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as f:
        for _ in range(copies):
            f.write(data)
    return copies * len(data)


# the child reports its own high-water mark: wait4's ru_maxrss would include the parent's memory
# at the fork
CHILD = ("import sys; from trainclock.cli import main; code = main(sys.argv[1:]); "
         "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')), file=sys.stderr); "
         "sys.exit(code)")


def measure(args: list[str]) -> tuple[float, float, int]:
    """(seconds, peak resident MB, exit code) of `trainclock ARGS` in a fresh process."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    if done.returncode not in (0, 1) or not lines or not lines[-1].isdigit():
        print(f"  trainclock {' '.join(args[:2])} exited {done.returncode}: {done.stderr[-300:]}", file=sys.stderr)
        return seconds, float("nan"), done.returncode
    return seconds, int(lines[-1]) / 1024, done.returncode  # VmHWM is in kB


def finding_rows(db: Path) -> int:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select count(*) from findings").fetchone()[0]
    except sqlite3.Error:
        return -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,200", help="log sizes in MB, comma-separated")
    parser.add_argument("--shared", type=Path, default=SHARED)
    parser.add_argument("--keep", type=Path, help="write the logs and databases here instead of a temporary folder")
    options = parser.parse_args()
    source = options.shared.resolve() / SOURCE_LOG
    import trainclock

    print(f"machine: {machine()}")
    print(f"trainclock from {Path(trainclock.__file__).parent}")
    print(f"log: {SOURCE_LOG} ({source.stat().st_size / 1e6:.2f} MB) repeated\n")
    header = (f"{'log MB':>7} {'lines':>9} | {'review s':>8} {'peak MB':>8} | {'import s':>8} {'peak MB':>8} "
              f"{'db MB':>7} {'findings':>9} | {'show s':>7} {'peak MB':>8}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="trainclock-memory-") as scratch:
        root = options.keep or Path(scratch)
        for megabytes in (float(s) for s in options.sizes.split(",")):
            log = root / f"{megabytes:g}MB" / "result_0.txt"
            size = write_log(source, log, megabytes)
            lines = size // max(1, source.stat().st_size) * source.read_bytes().count(b"\n")
            review_s, review_mb, _ = measure(["review", str(log)])
            db = log.parent / "results.db"
            db.unlink(missing_ok=True)
            import_s, import_mb, _ = measure(["results", "import", "--db", str(db), str(log)])
            show_s, show_mb, _ = measure(["results", "show", "--db", str(db), "1"])
            db_mb = sum(p.stat().st_size for p in db.parent.glob("results.db*")) / 1e6
            print(f"{size / 1e6:7.1f} {lines:9,} | {review_s:8.1f} {review_mb:8.0f} | {import_s:8.1f} {import_mb:8.0f} "
                  f"{db_mb:7.1f} {finding_rows(db):9,} | {show_s:7.1f} {show_mb:8.0f}", flush=True)
            if options.keep is None:
                log.unlink()


if __name__ == "__main__":
    main()
