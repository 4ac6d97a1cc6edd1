"""The precision a run trains in: bf16 autocast only where the device multiplies bf16 faster.
A CPU without bf16 instructions (simulated here by capping oneDNN at AVX2) runs bf16 matmuls
through a fallback slower than fp32 (100x here, 2.5x on a CI machine); a run there must choose fp32 by itself."""

import os
import subprocess
import sys
import time

import pytest
import torch

from trainclock.mllog.reader import read_events
from trainclock.device.peak import BF16_MIN_ADVANTAGE, bf16_speedup, matmul_peak_flops, resolve_precision
from trainclock.device import system

CPU = torch.device("cpu")
NO_BF16_INSTRUCTIONS = {"ONEDNN_MAX_CPU_ISA": "AVX2"}


def test_an_explicit_precision_is_kept():
    assert resolve_precision("bf16", CPU) == "bf16" and resolve_precision("fp32", CPU) == "fp32"
    with pytest.raises(ValueError, match="choose one of auto, bf16, fp32"):
        resolve_precision("fp8", CPU)


def test_auto_follows_the_measured_speedup():
    speedup = bf16_speedup(CPU)
    chosen = resolve_precision("auto", CPU)
    if abs(speedup - BF16_MIN_ADVANTAGE) > 0.3:  # far from the threshold, the choice cannot flip between measurements
        assert chosen == ("bf16" if speedup > BF16_MIN_ADVANTAGE else "fp32")


def probe(code: str) -> str:
    env = {**os.environ, **NO_BF16_INSTRUCTIONS}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout


def test_a_cpu_without_bf16_instructions_trains_in_fp32_and_measures_quickly():
    started = time.monotonic()
    out = probe("import torch; from trainclock.device.peak import *; d = torch.device('cpu');"
                "print(resolve_precision('auto', d), bf16_speedup(d), matmul_peak_flops(d, torch.bfloat16))")
    chosen, speedup, bf16_peak = out.split()
    # how much slower the fallback is depends on the CPU; only that bf16 is not clearly faster is certain
    assert chosen == "fp32" and float(speedup) < BF16_MIN_ADVANTAGE
    assert float(bf16_peak) > 0 and time.monotonic() - started < 30  # the peak's size shrinks to stay quick


@pytest.mark.slow
def test_a_run_without_bf16_instructions_logs_fp32_and_its_threads(tmp_path, corpus_dir):
    out = tmp_path / "out"
    env = {**os.environ, **NO_BF16_INSTRUCTIONS, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "trainclock.cli", "run", "gpt3-tiny", "--data", str(corpus_dir),
                           "--out", str(out), "--no-progress", "--seed", "1", "--max-samples", "64"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr  # stopped at the sample limit: aborted
    (log,) = out.glob("results/*/gpt3-tiny/result_0.txt")
    header = {e.key: e.value for e in read_events(log)[0]}
    assert header["trainclock_precision"] == "fp32" and header["trainclock_threads"] == 1
    assert header["trainclock_matmul_peak_flops"] > 1e8  # the measured peak, a plain number of FLOP/s
    assert header["trainclock_cpu"] == system.cpu_identity() and "vCPUs" in header["trainclock_cpu"]


def test_the_peak_of_a_given_size_is_a_rate():
    assert matmul_peak_flops(CPU, torch.float32, size=128, seconds=0.0) > 1e8
