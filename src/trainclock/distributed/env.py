"""Who this process is in a distributed run (torchrun's environment), and the process group."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from trainclock.distributed.collectives import backend_for


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    restart_count: int  # torchrun's elastic restarts of the worker group so far

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or ("LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ)


def current() -> DistEnv:
    return DistEnv(
        rank=int(os.environ.get("RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)),
    )


def device_for(env: DistEnv, requested: torch.device) -> torch.device:
    """One GPU per process (by local rank) on CUDA; CPU processes share the host."""
    if requested.type == "cuda":
        return torch.device("cuda", env.local_rank if requested.index is None else requested.index)
    return requested


def die_with_agent() -> None:
    """torchrun starts each worker in a session of its own, so a SIGKILL of the agent (or of the
    `trainclock run` above it) would leave the workers training, and writing checkpoints under a
    run that is being resumed. On Linux a worker asks the kernel to kill it when its parent dies."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the agent died before the request took effect
        os._exit(1)


def init_process_group(env: DistEnv, device: torch.device) -> None:
    """gloo on CPU, NCCL on GPU, chosen from the device (collectives.backend_for)."""
    if not env.distributed or dist.is_initialized():
        return
    if under_torchrun():
        die_with_agent()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = timedelta(minutes=10)
    store, rank, world_size = next(dist.rendezvous("env://", timeout=timeout))
    # torchrun's store outlives a restarted worker group: a prefix per attempt keeps the new group
    # from reading the dead group's addresses (gloo then fails with "connection refused").
    store = dist.PrefixStore(f"trainclock/attempt-{env.restart_count}", store)
    dist.init_process_group(backend_for(device), store=store, rank=rank, world_size=world_size, timeout=timeout)


def destroy_process_group() -> None:
    if dist.is_initialized():
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
