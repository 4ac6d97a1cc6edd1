"""Sharded checkpoints with torch.distributed.checkpoint (DCP): every rank writes its own
shards, so saving scales with the cluster, and a checkpoint loads into another world size.

Layout: <folder>/step_<N>/ holds DCP's files, each rank's RNG state and trainclock.json (loop
state, log offsets, run identity). A checkpoint is written as .step_<N>.tmp and renamed by
rank 0 once every rank has finished, so a killed writer leaves the previous one intact."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from trainclock.distributed.context import ParallelContext
from trainclock.errors import DataError, UsageError
from trainclock.storage import atomic_write_text

STATE_FILE = "trainclock.json"
KEEP = 2
# Optimizer state keyed by parameter name ("state.<fqn>.exp_avg"), not by position in a param
# group: each pipeline stage holds other parameters, and DCP merges every rank's keys.
OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


class Checkpointer:
    def __init__(self, folder: Path, ctx: ParallelContext, identity: dict, settings: dict | None = None) -> None:
        self.folder = folder
        self.ctx = ctx
        self.identity = identity  # what must match to resume: workload, batch, seed
        self.settings = settings or {}  # the run's other settings, which a resume without flags takes over

    def save(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loop_state: dict, offsets: dict) -> Path:
        step = loop_state["steps"]
        final = self.folder / f"step_{step:08d}"
        tmp = self.folder / f".step_{step:08d}.tmp"
        if self.ctx.env.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.ctx.barrier()
        aliases = getattr(model, "checkpoint_aliases", {})
        with _single_process_quiet():
            model_sd, optim_sd = get_state_dict(model, optimizer, options=OPTIONS)
        # an aliased parameter is written by the rank that holds the original
        state = {"model": _without(model_sd, aliases), "optim": _without(optim_sd, aliases)}
        with _single_process_quiet():
            dcp.save(state, checkpoint_id=str(tmp))
        torch.save(torch.get_rng_state(), tmp / f"rng_rank{self.ctx.env.rank}.pt")
        self.ctx.barrier()
        if self.ctx.env.is_main:
            meta = {"identity": self.identity, "settings": self.settings, "loop": loop_state, "offsets": offsets,
                    "world_size": self.ctx.env.world_size, "layout": self.ctx.layout.describe()}
            atomic_write_text(tmp / STATE_FILE, json.dumps(meta, indent=1))
            _fsync_dir(tmp)
            os.replace(tmp, final)
            _fsync_dir(self.folder)
            older = sorted(p for p in self.folder.glob("step_*") if p != final)
            for old in older[: max(len(older) - (KEEP - 1), 0)]:
                shutil.rmtree(old, ignore_errors=True)
        self.ctx.barrier()
        return final

    def load(self, path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
        """Restore model and optimizer in place; returns (loop state, log offsets)."""
        meta = read_meta(path)
        identity, loop_state, offsets = meta["identity"], meta["loop"], meta["offsets"]
        different = {k: (identity.get(k), v) for k, v in self.identity.items() if identity.get(k) != v}
        if different:
            detail = ", ".join(f"{k} {old} vs {new}" for k, (old, new) in different.items())
            raise UsageError(f"checkpoint {path} belongs to another run ({detail}); resume with the same "
                             "benchmark, seed and batch size, or start a new run without --resume")
        aliases = getattr(model, "checkpoint_aliases", {})
        with _single_process_quiet():
            model_sd, optim_sd = get_state_dict(model, optimizer, options=OPTIONS)
        state = {"model": _renamed(model_sd, aliases), "optim": _renamed(optim_sd, aliases)}
        try:
            with _single_process_quiet():
                dcp.load(state, checkpoint_id=str(path))
        except Exception as e:  # DCP raises several types for missing or damaged shards
            raise DataError(f"checkpoint {path} cannot be loaded ({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                            "delete it to fall back to an older one") from None
        back = {stored: local for local, stored in aliases.items()}
        set_state_dict(model, optimizer, model_state_dict=_renamed(state["model"], back),
                       optim_state_dict=_renamed(state["optim"], back), options=OPTIONS)
        rng = path / f"rng_rank{self.ctx.env.rank}.pt"
        if rng.exists():  # absent when resuming into a larger world
            torch.set_rng_state(torch.load(rng))
        return loop_state, offsets


@contextlib.contextmanager
def _single_process_quiet():
    """DCP warns on every call that torch.distributed is not initialised: in a single-process
    run that is expected, and the warning would land in the user's output."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _parameter_of(key: str, names) -> str | None:
    """Which of `names` a model key ("<fqn>") or flat optimizer key ("state.<fqn>.<x>",
    "param_groups.<fqn>.<x>") belongs to."""
    for name in names:
        if key == name or key.startswith((f"state.{name}.", f"param_groups.{name}.")):
            return name
    return None


def _without(state: dict, aliases: dict[str, str]) -> dict:
    return {k: v for k, v in state.items() if _parameter_of(k, aliases) is None}


def _renamed(state: dict, aliases: dict[str, str]) -> dict:
    renamed = {}
    for key, value in state.items():
        name = _parameter_of(key, aliases)
        renamed[key.replace(name, aliases[name], 1) if name else key] = value
    return renamed


def latest(folder: Path) -> Path | None:
    """The newest complete checkpoint in a folder (temporary folders of killed writers are ignored)."""
    if not folder.is_dir():
        return None
    complete = sorted(p for p in folder.glob("step_*") if (p / STATE_FILE).exists())
    return complete[-1] if complete else None


def read_meta(path: Path) -> dict:
    """A checkpoint's trainclock.json: identity, loop state and the log offsets to resume at."""
    try:
        meta = json.loads((path / STATE_FILE).read_text())
        if not all(k in meta for k in ("identity", "loop", "offsets")):
            raise KeyError("identity, loop or offsets")
        return meta
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"checkpoint {path} is corrupt ({type(e).__name__}: {e}); delete it to fall back to an older one") from None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
