"""Real processes: a scaling sweep over 1 and 2 gloo processes, and a job submitted to a real Slurm
(scripts/start_slurm.sh starts a single-node one). Each run trains 2 steps of gpt3-tiny."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainclock.mllog.reader import read_events
from trainclock.mllog.time_to_train import run_status

from .helpers import run_command

SHORT_RUN = ["--gbs", "8", "--max-samples", "16", "--device", "cpu"]


def logged(log: Path, key: str):
    return next(e.value for e in read_events(log)[0] if e.key == key)


@pytest.mark.slow
def test_a_sweep_over_one_and_two_processes(tmp_path, corpus_dir, capsys):
    out = tmp_path / "sweep"
    assert run_command(["scale", "gpt3-tiny", "--nproc", "1,2", "--seed", "5", "--cpu-threads", "2", "--out", str(out),
                        "--", "--data", str(corpus_dir), *SHORT_RUN]) == 0
    saved = json.loads((out / "scaling-gpt3-tiny.json").read_text())
    assert [(r["nproc"], r["runs"]) for r in saved["rows"]] == [(1, 1), (2, 1)]
    one, two = (Path(run["log"]) for run in saved["runs"])
    assert one.is_relative_to(out / "nproc-1") and two.is_relative_to(out / "nproc-2")
    assert logged(two, "trainclock_parallel_layout").startswith("dp=2")  # really two processes
    assert logged(one, "seed") == logged(two, "seed") == 5
    for run in saved["runs"]:
        assert run["status"] == "aborted" and run["steps"] == 2  # the 16-sample limit, 8 per step
        assert run["units_per_s"] > 0 and run["time_to_train_s"] > 0
    rows = saved["rows"]
    # --cpu-threads fixes the cores (detected from the runs' system descriptions too): the efficiency
    # is the plain throughput ratio
    assert [(r["hardware"], r["hardware_unit"]) for r in saved["runs"]] == [(2.0, "CPU cores in use")] * 2
    assert rows[1]["throughput_efficiency"] == pytest.approx(rows[1]["units_per_s"] / rows[0]["units_per_s"])
    printed = capsys.readouterr().out
    assert "thr. eff." in printed and "scaling-gpt3-tiny.csv" in printed


def slurm_answers() -> bool:
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.mark.slow
@pytest.mark.skipif(not slurm_answers(), reason="no running Slurm here (sbatch missing or slurmctld down); "
                                                "start one with scripts/start_slurm.sh (root, Debian, ~20 s)")
def test_a_real_slurm_job_leaves_the_log(tmp_path, corpus_dir, capsys):
    out = tmp_path / "out"
    assert run_command(["launch", "slurm", "gpt3-tiny", "--nodes", "1", "--gpus-per-node", "1", "--device", "cpu",
                        "--venv", sys.prefix, "--out", str(out), "--time", "00:05:00", "--submit",
                        "--", "--data", str(corpus_dir), "--seed", "3", "--gbs", "8", "--max-samples", "16"]) == 0
    job_id = capsys.readouterr().out.split("submitted Slurm job ")[1].split(";")[0]
    state = wait_for(job_id, timeout_s=180)
    console = out / "slurm" / f"trainclock-gpt3-tiny-{job_id}.out"
    # trainclock run exits 1 for a run stopped at a limit before its target, so Slurm says FAILED
    assert state == "FAILED ExitCode=1:0", f"job {job_id} ended {state}: {console.read_text() if console.exists() else ''}"
    (log,) = out.glob("results/*/gpt3-tiny/result_0.txt")
    assert run_status(read_events(log)[0]) == "aborted" and logged(log, "seed") == 3
    assert "run aborted" in console.read_text()  # the run's own summary, in Slurm's console file


def wait_for(job_id: str, timeout_s: float) -> str:
    """The job's final state and exit code; cancels it if it is not done in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        shown = subprocess.run(["scontrol", "show", "job", job_id, "-o"], capture_output=True, text=True).stdout
        state = shown.split("JobState=")[1].split()[0] if "JobState=" in shown else "GONE"
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return f"{state} ExitCode={shown.split('ExitCode=')[1].split()[0]}" if "ExitCode=" in shown else state
        time.sleep(1)
    subprocess.run(["scancel", job_id])
    return "TIMEOUT (cancelled by the test)"
