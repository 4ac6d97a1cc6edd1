"""Runs of the tests' toy workload as real `trainclock` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PLUGIN = {"TRAINCLOCK_WORKLOADS": "tests.workloads.toyvision"}
ROOT = Path(__file__).resolve().parents[2]


def trainclock(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, **PLUGIN, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "trainclock.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def start(*argv: str) -> subprocess.Popen:
    env = {**os.environ, **PLUGIN, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "trainclock.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)


def toy_run(out: Path, *extra: str) -> list[str]:
    return ["run", "toyvision-tiny", "--out", str(out), "--no-progress", "--precision", "fp32", *extra]


def records(out: Path, index: int = 0) -> list[dict]:
    metrics = next(out.glob(f"results/*/toyvision-tiny/result_{index}.metrics.jsonl"))
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def log_path(out: Path, index: int = 0) -> Path:
    return next(out.glob(f"results/*/toyvision-tiny/result_{index}.txt"))
