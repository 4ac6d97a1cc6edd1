"""Argument checks shared by the subcommands: each failure is a one-line UsageError."""

from __future__ import annotations

from trainclock.errors import UsageError


def device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise UsageError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"device type {dev.type!r} is not supported; use cpu or cuda")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for but no CUDA GPU is visible; use --device cpu")
    return dev


def positive(flag: str, value) -> None:
    if value is not None and not value > 0:
        raise UsageError(f"{flag} must be positive, got {value}")


def not_negative(flag: str, value) -> None:
    if value is not None and value < 0:
        raise UsageError(f"{flag} must be 0 or more, got {value}")


MAX_SEED = 2**31 - 1  # numpy's and torch's generators both take it; seeds are logged as ints


def seed(value: int | None) -> None:
    if value is not None and not 0 <= value <= MAX_SEED:
        raise UsageError(f"--seed {value} is out of range; use 0 to {MAX_SEED}")


MAX_NODES = 100_000  # far past the largest MLPerf Training systems (10,752 GPUs: 1,344 nodes of 8)
MAX_PROCS_PER_NODE = 1_024  # processes on one node: GPUs (8 to 16) or CPU processes (at most its cores)


def at_most(flag: str, value, limit: int) -> None:
    """A count past any real machine (a typo, an extra zero) is refused before anything is written."""
    if value is not None and value > limit:
        raise UsageError(f"{flag} {value:,} is more than trainclock supports; use 1 to {limit:,}")
