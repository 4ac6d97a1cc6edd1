"""Starting a multi-process run: the user's `trainclock run ... --nproc N` re-executes itself
under torchrun (torch.distributed.run), which starts N workers per node, restarts a failed
worker group up to --max-restarts times, and reports each failed rank."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

from trainclock.errors import UsageError


def torchrun_command(worker_argv: list[str], nproc: int, nnodes: int = 1, node_rank: int = 0,
                     rdzv: str | None = None, max_restarts: int = 0, run_id: str | None = None) -> list[str]:
    if nproc < 1 or nnodes < 1:
        raise UsageError(f"--nproc and --nnodes must be at least 1, got {nproc} and {nnodes}")
    if not 0 <= node_rank < nnodes:
        raise UsageError(f"--node-rank {node_rank} must be between 0 and {nnodes - 1}")
    if max_restarts < 0:
        raise UsageError(f"--max-restarts must be 0 or more, got {max_restarts}")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", f"--nnodes={nnodes}",
           f"--max-restarts={max_restarts}"]
    if nnodes == 1 and rdzv is None:
        cmd.append("--standalone")
    else:
        if rdzv is None or not re.fullmatch(r"[\w.\-]+:\d{1,5}", rdzv):
            raise UsageError(f"a multi-node run needs --rdzv HOST:PORT (the rendezvous on node 0), got {rdzv!r}")
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv}", f"--rdzv-id={run_id or uuid.uuid4().hex[:12]}",
                f"--node-rank={node_rank}"]
    # "--" keeps torchrun from reading our options (argparse matches option prefixes everywhere)
    return [*cmd, "-m", "trainclock.cli", "--", *worker_argv]


def run_under_torchrun(cmd: list[str], extra_env: dict[str, str]) -> int:
    """Run torchrun in the foreground; its exit code is the run's."""
    try:
        return subprocess.run(cmd, env={**os.environ, **extra_env}).returncode
    except KeyboardInterrupt:
        return 130
