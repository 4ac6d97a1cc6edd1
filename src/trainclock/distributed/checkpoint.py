"""Sharded checkpoints with torch.distributed.checkpoint (DCP): every rank writes its own
shards, so saving scales with the cluster, and a checkpoint loads into another world size.

Layout: <folder>/step_<N>/ holds DCP's files, each rank's RNG state and trainclock.json (loop
state, log offsets, run identity, and the size and sha256 of every other file). A checkpoint is
written as .step_<N>.tmp and renamed by rank 0 once every rank has finished, so a killed writer
leaves the previous one intact; a checkpoint damaged afterwards (disk, copy, hand edits) fails
`damage` and a resume falls back to the one before it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict, get_state_dict,
                                                     set_model_state_dict, set_state_dict)

from trainclock.distributed.context import ParallelContext
from trainclock.errors import DataError, UsageError
from trainclock.storage import atomic_write_text

STATE_FILE = "trainclock.json"
# The newest checkpoint and the one before it: if the newest turns out damaged, a resume has
# one to fall back to. Never less than 2.
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
        rank = self.ctx.env.rank
        torch.save(torch.get_rng_state(), tmp / f"rng_rank{rank}.pt")
        self.ctx.barrier()
        # each rank hashes the files it wrote (still in its page cache), rank 0 whatever is left
        mine = {p.name: _fingerprint(p) for p in tmp.iterdir()
                if p.name.startswith(f"__{rank}_") or p.name == f"rng_rank{rank}.pt"}
        files = _gather_on_main(self.ctx, mine)
        if self.ctx.env.is_main:
            for p in sorted(tmp.iterdir()):
                if p.name not in files and p.is_file():
                    files[p.name] = _fingerprint(p)
            meta = {"identity": self.identity, "settings": self.settings, "loop": loop_state, "offsets": offsets,
                    "world_size": self.ctx.env.world_size, "layout": self.ctx.layout.describe(),
                    "files": dict(sorted(files.items()))}
            meta["checksum"] = _meta_checksum(meta)
            atomic_write_text(tmp / STATE_FILE, json.dumps(meta, indent=1))
            _fsync_dir(tmp)
            if final.exists():  # a damaged one of the same step, left behind by a fallback
                shutil.rmtree(final)
            os.replace(tmp, final)
            _fsync_dir(self.folder)
            _prune(self.folder, step)
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
        # damage shows up here only if the files changed after `damage` passed them
        try:
            with _single_process_quiet():
                dcp.load(state, checkpoint_id=str(path))
        # DCP raises several types for missing or damaged shards; its CheckpointException is a BaseException
        except (Exception, CheckpointException) as e:
            raise DataError(f"checkpoint {path} cannot be loaded ({type(e).__name__}: {_first_line(e)}); "
                            "delete it to fall back to an older one") from None
        back = {stored: local for local, stored in aliases.items()}
        set_state_dict(model, optimizer, model_state_dict=_renamed(state["model"], back),
                       optim_state_dict=_renamed(state["optim"], back), options=OPTIONS)
        rng = path / f"rng_rank{self.ctx.env.rank}.pt"
        if rng.exists():  # absent when resuming into a larger world
            try:
                torch.set_rng_state(torch.load(rng))
            except Exception as e:
                raise DataError(f"checkpoint {path} cannot be loaded ({rng.name}: {type(e).__name__}: {_first_line(e)}); "
                                "delete it to fall back to an older one") from None
        return loop_state, offsets


class ModelSnapshots:
    """The model's weights alone at the points a workload evaluates offline (EvalSchedule.offline),
    one DCP folder each under `folder`: every rank writes its shards, and rank 0 renames the
    finished folder into place, so a killed writer leaves no half snapshot to evaluate."""

    def __init__(self, folder: Path, ctx: ParallelContext) -> None:
        self.folder = folder
        self.ctx = ctx

    def path(self, samples: int) -> Path:
        return self.folder / f"samples_{samples:012d}"

    def save(self, model: torch.nn.Module, samples: int) -> None:
        final, tmp = self.path(samples), self.folder / f".samples_{samples:012d}.tmp"
        if self.ctx.env.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        self.ctx.barrier()
        aliases = getattr(model, "checkpoint_aliases", {})  # as Checkpointer.save
        with _single_process_quiet():
            dcp.save({"model": _without(get_model_state_dict(model), aliases)}, checkpoint_id=str(tmp))
        self.ctx.barrier()
        if self.ctx.env.is_main:
            _fsync_dir(tmp)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            _fsync_dir(self.folder)
        self.ctx.barrier()

    def load(self, model: torch.nn.Module, samples: int) -> None:
        aliases = getattr(model, "checkpoint_aliases", {})
        state = {"model": _renamed(get_model_state_dict(model), aliases)}
        try:
            with _single_process_quiet():
                dcp.load(state, checkpoint_id=str(self.path(samples)))
        except (Exception, CheckpointException) as e:  # see Checkpointer.load
            raise DataError(f"model snapshot {self.path(samples)} cannot be loaded ({type(e).__name__}: "
                            f"{_first_line(e)}); run again: offline evaluation needs every snapshot") from None
        set_model_state_dict(model, _renamed(state["model"], {stored: local for local, stored in aliases.items()}))

    def clear(self) -> None:
        """Removes the snapshots once they are scored: the log holds what they gave (a full-size
        latent-diffusion UNet is 3.5 GB a snapshot)."""
        self.ctx.barrier()
        if self.ctx.env.is_main:
            shutil.rmtree(self.folder, ignore_errors=True)


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


def step_folders(folder: Path) -> list[Path]:
    """Every finished checkpoint folder (step_<N>, not a writer's temporary), newest first,
    intact or not."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("step_*") if p.is_dir()), key=_step_of, reverse=True)


def newest_intact(folder: Path, check: Callable[[dict], str | None] | None = None, files: bool = True
                  ) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint that passes `damage` (and `check` on its meta: a reason or None),
    and the newer ones that did not, each with its reason. files=False checks the meta file
    alone (no hashing), enough to read what every checkpoint of a run shares: seed, settings."""
    damaged = []
    for path in step_folders(folder):
        reason = damage(path) if files else _meta(path)[1]
        if reason is None and check is not None:
            reason = check(read_meta(path))
        if reason is None:
            return path, damaged
        damaged.append((path, reason))
    return None, damaged


def damage(path: Path) -> str | None:
    """Why a checkpoint cannot be trusted (a short phrase), or None when its meta file is
    whole and every file it lists has the size and sha256 recorded at save."""
    meta, reason = _meta(path)
    if reason:
        return reason
    files = meta.get("files")
    if not isinstance(files, dict) or not files or "checksum" not in meta:
        return f"{STATE_FILE} lists no file checksums (written by an older trainclock)"
    for name, recorded in files.items():
        file = path / name
        try:
            size = file.stat().st_size
            if size != recorded["size"]:
                return f"{name} has {size} bytes, {recorded['size']} were written"
            if _sha256(file) != recorded["sha256"]:
                return f"{name} fails its sha256 check"
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as e:
            return f"{name} cannot be read: {e.strerror}"
        except (KeyError, TypeError):
            return f"{STATE_FILE} has a malformed entry for {name}"
    return None


def read_meta(path: Path) -> dict:
    """A checkpoint's trainclock.json: identity, loop state and the log offsets to resume at."""
    meta, reason = _meta(path)
    if reason:
        raise DataError(f"checkpoint {path} is corrupt ({reason}); delete it to fall back to an older one")
    return meta


def _meta(path: Path) -> tuple[dict, str | None]:
    """The meta file's content, or why it cannot be used."""
    try:
        meta = json.loads((path / STATE_FILE).read_text())
    except FileNotFoundError:
        return {}, f"{STATE_FILE} is missing"
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return {}, f"{STATE_FILE} is unreadable: {type(e).__name__}: {_first_line(e)[:80]}"
    if not isinstance(meta, dict) or not all(k in meta for k in ("identity", "loop", "offsets")):
        return {}, f"{STATE_FILE} lacks identity, loop or offsets"
    if "checksum" in meta and meta["checksum"] != _meta_checksum(meta):
        return {}, f"{STATE_FILE} fails its checksum"
    return meta, None


def _meta_checksum(meta: dict) -> str:
    """sha256 of the meta file's content without this field: an edit or a flipped digit
    can leave the JSON valid, and the offsets and loop state in it must be right."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _fingerprint(path: Path) -> dict:
    return {"size": path.stat().st_size, "sha256": _sha256(path)}


def _gather_on_main(ctx: ParallelContext, mine: dict) -> dict:
    """Every rank's dicts merged, on rank 0 (others get theirs back)."""
    if not ctx.env.distributed:
        return dict(mine)
    parts: list = [None] * ctx.env.world_size
    dist.all_gather_object(parts, mine)
    return {k: v for part in parts for k, v in part.items()}


def _step_of(path: Path) -> int:
    try:
        return int(path.name.removeprefix("step_"))
    except ValueError:
        return -1


def _prune(folder: Path, step: int) -> None:
    """Keep the KEEP newest checkpoints up to `step`. Those past it are from before a fallback
    to an older checkpoint: damaged, and describing a log that has since been cut back."""
    kept = 0
    for path in step_folders(folder):
        stale = _step_of(path) > step
        if not stale and kept < KEEP:
            kept += 1
            continue
        shutil.rmtree(path, ignore_errors=True)


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0][:200]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
