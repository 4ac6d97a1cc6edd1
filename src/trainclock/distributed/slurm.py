"""Slurm launcher: an sbatch script that runs `trainclock run` on every node of an allocation,
one Slurm task per node; each task's `trainclock run --nproc G` starts that node's G processes
under torchrun, and all nodes meet at a rendezvous on the allocation's first node.

The result tree (--out) must be on a filesystem every node sees: rank 0 writes the MLPerf log
there, and Slurm writes the job's console output beside it (<out>/slurm/<job>-<id>.out).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import TrainclockError, UsageError

# Slurm's --time forms that name hours, minutes and seconds: HH:MM:SS or D-HH:MM:SS
_TIME = re.compile(r"(\d+-)?\d{1,3}:[0-5]\d:[0-5]\d")
# what may go into an #SBATCH line unquoted (sbatch reads those lines itself, not a shell)
_SBATCH_VALUE = re.compile(r"[\w.\-,:/@+]+")


@dataclass(frozen=True)
class SlurmJob:
    benchmark: str
    nodes: int
    gpus_per_node: int  # processes per node: one per GPU (on CPU nodes, CPU processes)
    out: Path  # result tree root, on a filesystem shared by all nodes
    run_args: tuple[str, ...] = ()  # further `trainclock run` arguments, passed unchanged
    device: str = "cuda"  # "cpu" requests no GPUs from Slurm
    partition: str | None = None
    time_limit: str | None = None  # HH:MM:SS or D-HH:MM:SS
    account: str | None = None
    image: str | None = None  # container image, started by the pyxis plugin (srun --container-image)
    venv: Path | None = None  # virtual environment holding trainclock on every node
    port: int = 29500  # the rendezvous port on the first node
    job_name: str | None = None

    @property
    def name(self) -> str:
        return self.job_name or f"trainclock-{self.benchmark}"


def check_shape(nodes: int, gpus_per_node: int, device: str, port: int, scheduler: str) -> None:
    """The checks every cluster launcher shares (Slurm, Kubernetes)."""
    if nodes < 1:
        raise UsageError(f"--nodes must be at least 1, got {nodes}")
    if gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node must be at least 1, got {gpus_per_node}")
    if device not in ("cuda", "cpu"):
        raise UsageError(f"--device must be cuda or cpu for a {scheduler} job, got {device!r}")
    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535, got {port}")


def check(job: SlurmJob) -> None:
    """Every problem a job description can have, as a one-line UsageError, before anything is written."""
    check_shape(job.nodes, job.gpus_per_node, job.device, job.port, "Slurm")
    if job.time_limit is not None and not _TIME.fullmatch(job.time_limit):
        raise UsageError(f"--time must be HH:MM:SS or D-HH:MM:SS (e.g. 02:00:00), got {job.time_limit!r}")
    if not _SBATCH_VALUE.fullmatch(str(job.out)):
        raise UsageError(f"--out {str(job.out)!r} cannot go into an #SBATCH line; choose a path without spaces or quotes")
    if job.image and job.venv:
        raise UsageError("--image and --venv are alternatives: trainclock comes from the container or from the venv")
    for flag, value in (("--partition", job.partition), ("--account", job.account), ("--job-name", job.name)):
        if value is not None and not _SBATCH_VALUE.fullmatch(value):
            raise UsageError(f"{flag} {value!r} has characters Slurm does not accept there; use letters, digits, '.', '-', '_'")


def node_command(job: SlurmJob) -> str:
    """The shell command each node's task runs. $SLURM_NODEID, $MASTER_ADDR and $SLURM_JOB_ID stay
    unexpanded: each task's own shell expands them, so every node gets its own rank and all
    nodes the same rendezvous id."""
    trainclock = str(job.venv / "bin" / "trainclock") if job.venv else "trainclock"
    fixed = [trainclock, "run", job.benchmark, "--nproc", str(job.gpus_per_node), "--nnodes", str(job.nodes)]
    rest = ["--device", job.device, "--out", str(job.out), *job.run_args]
    return (f"exec {shlex.join(fixed)} --node-rank \"$SLURM_NODEID\" --rdzv \"$MASTER_ADDR:{job.port}\" "
            f"--run-id \"$SLURM_JOB_ID\" "
            f"{shlex.join(rest)}")


def render(job: SlurmJob) -> str:
    """The sbatch script for `job` (checked first)."""
    check(job)
    processes = job.nodes * job.gpus_per_node
    unit = "GPU" if job.device == "cuda" else "CPU process"
    directives = [
        f"--job-name={job.name}",
        f"--nodes={job.nodes}",
        "--ntasks-per-node=1",  # one torchrun agent per node; it starts the node's processes
        *([f"--gpus-per-node={job.gpus_per_node}"] if job.device == "cuda" else []),
        "--exclusive",  # a timing run shares its nodes with nobody
        f"--output={job.out / 'slurm'}/%x-%j.out",
        *([f"--partition={job.partition}"] if job.partition else []),
        *([f"--time={job.time_limit}"] if job.time_limit else []),
        *([f"--account={job.account}"] if job.account else []),
    ]
    srun = [
        "srun", f"--nodes={job.nodes}", "--ntasks-per-node=1",
        # without this a task gets one CPU: the node's processes would share a single core
        '--cpus-per-task="$SLURM_CPUS_ON_NODE"',
        "--kill-on-bad-exit=1",  # one node failing ends the job instead of leaving the others waiting
    ]
    if job.image:
        srun += [f"--container-image={shlex.quote(job.image)}",
                 f"--container-mounts={shlex.quote(f'{job.out}:{job.out}')}"]
    lines = [
        "#!/bin/bash",
        f"# Written by `trainclock launch slurm`: {job.benchmark} on {job.nodes} node(s) x {job.gpus_per_node} "
        f"{unit}(s) = {processes} processes.",
        *(f"#SBATCH {d}" for d in directives),
        "set -eu",
        "",
        "# the first node of the allocation hosts the rendezvous (rank 0 runs there and writes the log)",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
        "export MASTER_ADDR",
        "",
        "# the single quotes keep $SLURM_NODEID for each task's own shell",
        f"{' '.join(srun)} \\",
        f"  bash -c {shlex.quote(node_command(job))}",
        "",
    ]
    return "\n".join(lines)


def submit(script: Path) -> str:
    """Submit with sbatch; the job id."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise UsageError(f"sbatch is not on PATH: run `sbatch {script}` on a Slurm login node, or drop --submit")
    done = subprocess.run([sbatch, "--parsable", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise TrainclockError(f"sbatch rejected {script}: {reason}")
    return done.stdout.strip().split(";")[0]  # --parsable prints "<id>" or "<id>;<cluster>"
