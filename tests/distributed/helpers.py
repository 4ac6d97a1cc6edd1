"""Runs of gpt3-tiny as real processes (torchrun/gloo for several), and their loss curves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "trainclock.cli"]


def tiny_args(corpus: Path, out: Path, *extra: str, samples: int = 640) -> list[str]:
    # fp32: parity across layouts is then limited by reduction order only, not bf16 rounding
    return ["run", "gpt3-tiny", "--data", str(corpus), "--out", str(out), "--seed", "5", "--no-progress",
            "--precision", "fp32", "--max-samples", str(samples), *extra]


def run(argv: list[str], timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`env` adds to the environment (a module-wide TRAINCLOCK_HOME, say)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}  # two processes on two cores: one thread each
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout, env=env)


def start(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def losses(out: Path, index: int = 0) -> list[float]:
    """The per-step training losses a run recorded, in step order."""
    metrics = next(out.glob(f"results/*/gpt3-tiny/result_{index}.metrics.jsonl"))
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == list(range(len(steps))), "steps missing or repeated"
    return [r["loss"] for r in steps]


def evals(out: Path, index: int = 0) -> list[tuple[int, float]]:
    from trainclock.mllog.reader import read_events

    log = next(out.glob(f"results/*/gpt3-tiny/result_{index}.txt"))
    events, problems = read_events(log)
    assert not problems
    return [(e.metadata["epoch_num"], e.value) for e in events if e.key == "eval_accuracy"]
