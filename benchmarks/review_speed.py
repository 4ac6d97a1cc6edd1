"""How fast `trainclock review` checks and scores MLPerf logs: logs/s and MB/s on the real logs of
shared/mlperf-results, and on a larger tree made of copies of them (each organization folder
copied under new names, so every copy is reviewed as an entry of its own); then trainclock against
the official result summarizer on the same tree (shared/mlperf-suite), in the same run.

  python benchmarks/review_speed.py [--shared PATH] [--suite PATH] [--copies 10] [--repeat 5] [--no-official]

Figures printed:
  cold      a fresh Python process reviewing all of --shared (imports included), as the CLI does
  warm      review_path(shared) again in a warm process (rules compiled, references computed), best of --repeat
  large     review_path of the replicated tree, best of --repeat
  trainclock  `trainclock review` of a copy of --suite in a fresh process, as a user runs it
  official  `python -m mlperf_logging.result_summarizer <copy>/<round>/{org,...} training <ruleset>` (the
            installed package: compliance checker, scores, RCP checker) on a fresh copy of --suite, once per
            round; a copy because it deletes and rewrites scaling.json in the folders it reads
  ratio     official / trainclock: the review must stay at least 10x faster
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainclock.review.tree import ROUND_FOLDER, review_path

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "mlperf-results"
SUITE = SHARED.parent / "mlperf-suite"
REQUIRED_RATIO = 10.0


def round_dirs(root: Path) -> list[Path]:
    """The round folders of `root` (v3.1, training_results_v4.0: any round trainclock reviews)."""
    return sorted(p for p in root.iterdir() if p.is_dir() and ROUND_FOLDER.fullmatch(p.name))


def ruleset(round_dir: Path) -> str:
    """The summarizer's ruleset of a round folder: v4.1 -> 4.1.0."""
    return f"{ROUND_FOLDER.fullmatch(round_dir.name).group(1)}.0"


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


def writable_copy(root: Path, into: Path) -> Path:
    """The round folders of `root` copied under `into`, writable (the fixtures are read-only)."""
    for round_dir in round_dirs(root):
        shutil.copytree(round_dir, into / round_dir.name)
    for path in into.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    return into


def trainclock_seconds(tree: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sys; from trainclock.cli import main; sys.exit(main())",
                    "review", str(tree)], stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def official_seconds(tree: Path) -> float:
    """The installed summarizer's command line on `tree` (a copy it may change), one call per round."""
    total = 0.0
    for round_dir in round_dirs(tree):
        orgs = sorted(p.name for p in round_dir.iterdir() if (p / "results").is_dir())
        folder = f"{round_dir}/{{{','.join(orgs)}}}" if len(orgs) > 1 else f"{round_dir}/{orgs[0]}"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", folder, "training",
                        ruleset(round_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, cwd=tree)  # cwd: it writes its own log files where it runs
        total += time.perf_counter() - start
    return total


def compare_with_official(suite: Path, repeat: int) -> float:
    """Best-of-`repeat` seconds of trainclock and of the official summarizer on copies of `suite`; the ratio."""
    logs, size = logs_and_bytes(suite)
    ours, theirs = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            ours.append(trainclock_seconds(writable_copy(suite, Path(a))))
            theirs.append(official_seconds(writable_copy(suite, Path(b))))
    report("trainclock", min(ours), logs, size)
    report("official", min(theirs), logs, size)
    ratio = min(theirs) / min(ours)
    verdict = "ok" if ratio >= REQUIRED_RATIO else f"TOO SLOW: must be at least {REQUIRED_RATIO:g}x"
    print(f"ratio     official / trainclock = {ratio:.1f}x on {suite} ({verdict})")
    return ratio


def report(label: str, seconds: float, logs: int, size: int) -> None:
    print(f"{label:<10} {seconds * 1000:9.1f} ms  {logs:5d} logs  {size / 1e6:7.1f} MB  "
          f"{logs / seconds:8.0f} logs/s  {size / 1e6 / seconds:7.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the MLPerf result logs (default: %(default)s)")
    parser.add_argument("--copies", type=int, default=10, help="copies of shared/ in the large tree")
    parser.add_argument("--repeat", type=int, default=5, help="timings per figure; the best is printed")
    parser.add_argument("--suite", type=Path, default=SUITE,
                        help="the tree trainclock and the official summarizer both score (default: %(default)s)")
    parser.add_argument("--official-repeat", type=int, default=1,
                        help="timings of the comparison with the official summarizer; the best is used")
    parser.add_argument("--no-official", action="store_true", help="skip the comparison with the official summarizer")
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
    if not args.no_official:
        ratio = compare_with_official(args.suite.resolve(), args.official_repeat)
        if ratio < REQUIRED_RATIO:
            sys.exit(1)


if __name__ == "__main__":
    main()
