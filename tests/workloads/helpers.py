"""`trainclock` as a real process, for the workloads' end-to-end tests: one way to start it, read
what a run wrote, and kill a run at its first checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOY = {"TRAINCLOCK_WORKLOADS": "tests.workloads.toyvision"}  # the test-only workload, as a plugin
TOY_MEMBER = "toyvision-tiny"


def environment(real_data: bool = True, **env: str) -> dict[str, str]:
    """One thread per process (tests run beside each other's processes), the repository importable.
    real_data drops the test's TRAINCLOCK_HOME: the tiers' generated data is cached in the real data
    home once for every test session, while results still go to the test's TRAINCLOCK_DB (conftest)."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **env}
    if real_data and "TRAINCLOCK_HOME" not in env:
        full.pop("TRAINCLOCK_HOME", None)
    return full


def trainclock(*argv: str, timeout: float = 600, real_data: bool = True, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainclock.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=environment(real_data, **env), cwd=ROOT)


def start(*argv: str, real_data: bool = True, **env: str) -> subprocess.Popen:
    """A `trainclock` process in its own process group, so a kill reaches torchrun's workers too."""
    return subprocess.Popen([sys.executable, "-m", "trainclock.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=environment(real_data, **env), cwd=ROOT,
                            start_new_session=True)


def prepare_data(member: str) -> str:
    """`trainclock data prepare MEMBER` (untimed, cached in the real data home); its output."""
    done = trainclock("data", "prepare", member)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def records(out: Path, member: str, index: int = 0) -> list[dict]:
    metrics = next(out.glob(f"results/*/{member}/result_{index}.metrics.jsonl"))
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def log_path(out: Path, member: str, index: int = 0) -> Path:
    return next(out.glob(f"results/*/{member}/result_{index}.txt"))


def losses(out: Path, member: str) -> list[float]:
    return [r["loss"] for r in records(out, member) if "loss" in r]


def evaluations(out: Path, member: str, metric: str | None = None) -> list:
    """Each evaluation's metrics (a dict), or one metric's values."""
    evals = [r["eval"] for r in records(out, member) if "eval" in r]
    return [e[metric] for e in evals] if metric else evals


def kill_at_first_checkpoint(out: Path, member: str, *run_argv: str, timeout: float = 300,
                             real_data: bool = True, **env: str) -> None:
    """Starts `trainclock run MEMBER --out OUT RUN_ARGV`, waits for its first complete checkpoint
    (trainclock.json is written last) and kills the whole process group with SIGKILL."""
    victim = start("run", member, "--out", str(out), *run_argv, real_data=real_data, **env)
    deadline = time.monotonic() + timeout
    while not list(out.glob(f"checkpoints/*/{member}/result_0/step_*/trainclock.json")):
        assert time.monotonic() < deadline and victim.poll() is None, "no checkpoint before the run ended"
        time.sleep(0.01)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()


def toy(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`trainclock` with the test-only workload, in the test's own data home."""
    return trainclock(*argv, timeout=timeout, real_data=False, **TOY)


def toy_run(out: Path, *extra: str) -> list[str]:
    return ["run", TOY_MEMBER, "--out", str(out), "--no-progress", "--precision", "fp32", *extra]


def error_line(result: tuple[int, str, str]) -> str:
    """The one line a refused command prints (the `cli` fixture's result): exit code 2, no traceback."""
    code, _, err = result
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = err.strip().splitlines()
    assert line.startswith("trainclock: error: "), line
    return line
