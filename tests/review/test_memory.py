"""A review's memory does not grow with its log (issue 11: a 200 MB log took 1.5 GB): peak
resident memory of `trainclock review` in a fresh process, for a log and one 10x larger."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

LOG = "v3.0/NVIDIA_CoreWeave/results/coreweave_hgxh100_n448_ngc23.04_pytorch/gpt3/result_0.txt"
GROWTH_MB = 25  # allowed between a 2 MB and a 20 MB log; before the streaming reader: 132 MB


# the child reports its own high-water mark: ru_maxrss from wait4 would include the memory of
# the pytest process it was forked from
CHILD = ("import sys; from trainclock.cli import main; code = main(sys.argv[1:]); "
         "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')), file=sys.stderr); "
         "sys.exit(code)")


def peak_mb(args: list[str]) -> float:
    """Peak resident MB of `trainclock ARGS` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", CHILD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return int(done.stderr.strip().splitlines()[-1]) / 1024  # VmHWM is in kB


def repeated(source: Path, target: Path, megabytes: float) -> Path:
    data = source.read_bytes()
    target.write_bytes(data * max(1, round(megabytes * 1e6 / len(data))))
    return target


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB is Linux's")
def test_review_and_import_memory_stay_flat_while_the_log_grows_10x(shared_results, tmp_path):
    peaks = {}
    for megabytes in (2, 20):
        folder = tmp_path / f"{megabytes}MB"
        folder.mkdir()
        log = repeated(shared_results / LOG, folder / "result_0.txt", megabytes)
        peaks[megabytes] = (peak_mb(["review", str(log)]),
                            peak_mb(["results", "import", "--db", str(folder / "results.db"), str(log)]))
    (review_small, import_small), (review_large, import_large) = peaks[2], peaks[20]
    print(f"peak MB (review, import): {peaks}")
    assert review_large - review_small < GROWTH_MB, peaks
    assert import_large - import_small < GROWTH_MB, peaks
