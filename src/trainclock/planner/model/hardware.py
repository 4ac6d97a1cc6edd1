"""The accelerator catalogue: published peak FLOP/s, memory and links of each accelerator, from
the built-in catalogue.toml, from users' TOML files of the same form, and "this-cpu", measured
on the spot. A missing, mistyped or inconsistent field is a one-line DataError naming the file,
the entry and the field."""

from __future__ import annotations

import math
import os
import re
import time
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

from trainclock.errors import DataError, UsageError

PRECISIONS = ("fp8", "bf16", "fp32")
THIS_CPU = "this-cpu"

_REQUIRED = {
    "name": "the accelerator's full name",
    "peak_tflops": "dense peak TFLOP/s per precision, e.g. { bf16 = 989.4, fp8 = 1978.9 }",
    "memory_gb": "GB of memory per accelerator",
    "memory_bandwidth_gb_per_s": "memory bandwidth in GB/s",
    "accelerators_per_node": "how many accelerators share a node's fast fabric",
    "intra_node_gb_per_s": "GB/s per direction per accelerator inside a node (0 if alone)",
    "inter_node_gb_per_s": "GB/s per direction per accelerator between nodes (0 if none)",
}
_OPTIONAL = {
    "intra_node_latency_us": 3.0,  # typical NCCL per-hop latency on NVLink
    "inter_node_latency_us": 8.0,  # typical NCCL per-hop latency on InfiniBand
    "power_watts": None,
    "aliases": [],
    "like": None,
    "source": "",
}
_ID = re.compile(r"[a-z0-9][a-z0-9.-]*$")


@dataclass(frozen=True)
class Accelerator:
    id: str
    name: str
    peak_flops: dict[str, float]  # FLOP/s by precision
    memory_bytes: float
    memory_bandwidth: float  # bytes/s
    accelerators_per_node: int
    intra_node_bandwidth: float  # bytes/s per direction per accelerator
    inter_node_bandwidth: float
    intra_node_latency: float  # seconds per hop
    inter_node_latency: float
    power_watts: float | None = None
    aliases: tuple[str, ...] = ()
    like: str | None = None
    source: str = ""

    def peak(self, precision: str) -> float:
        try:
            return self.peak_flops[precision]
        except KeyError:
            have = ", ".join(self.peak_flops)
            raise UsageError(f"{self.id} has no {precision} peak in the catalogue (it has {have}); "
                             f"use --layout precision=<one of those>") from None


def load_catalogue(user_files: list[Path] | tuple[Path, ...] = ()) -> dict[str, Accelerator]:
    """The built-in accelerators plus those of `user_files` (a user entry replaces a built-in one
    of the same id). "this-cpu" is not listed: it is measured when asked for (`find`)."""
    text = (resources.files("trainclock.planner.model") / "catalogue.toml").read_text()
    catalogue = parse_catalogue(text, "built-in catalogue.toml")
    for path in user_files:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"hardware file {path} not found; give the path of a TOML file") from None
        except UnicodeDecodeError as e:
            raise DataError(f"hardware file {path} is not UTF-8 text (byte {e.start} cannot be decoded): "
                            "give a TOML file as in planner/model/catalogue.toml") from None
        except OSError as e:
            raise UsageError(f"cannot read hardware file {path}: {e.strerror}") from None
        for accelerator_id, acc in parse_catalogue(text, str(path)).items():
            built_in = catalogue.get(accelerator_id)
            if built_in is not None and not acc.aliases:
                # the published results name the built-in's hardware by these: a redefinition that
                # gives none still stands for it (else calibration finds no accelerator for them)
                acc = replace(acc, aliases=built_in.aliases)
            catalogue[accelerator_id] = acc
    for acc in catalogue.values():
        if acc.like is not None and (acc.like == acc.id or acc.like not in catalogue):
            raise DataError(f"[{acc.id}] has like = {acc.like!r}, which is not another accelerator in the "
                            f"catalogue; name one of: {', '.join(sorted(catalogue))}")
    return catalogue


def find(catalogue: dict[str, Accelerator], accelerator_id: str) -> Accelerator:
    if accelerator_id == THIS_CPU:
        return this_cpu()
    try:
        return catalogue[accelerator_id]
    except KeyError:
        raise UsageError(f"unknown accelerator {accelerator_id!r}; choose one of: {', '.join(sorted(catalogue))}, "
                         f"{THIS_CPU}, or describe yours in a TOML file and pass --hardware FILE") from None


def by_alias(catalogue: dict[str, Accelerator], model_name: str) -> Accelerator:
    """The accelerator an MLPerf system description calls `model_name`."""
    for acc in catalogue.values():
        if model_name == acc.name or model_name in acc.aliases:
            return acc
    raise DataError(f"no catalogue accelerator is called {model_name!r}; add it to an entry's aliases")


def parse_catalogue(text: str, origin: str) -> dict[str, Accelerator]:
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise DataError(f"{origin}: not valid TOML ({e}); fix the file") from None
    catalogue = {}
    for accelerator_id, fields in tables.items():
        where = f"{origin}: [{accelerator_id}]"
        if not isinstance(fields, dict):
            raise DataError(f"{origin}: {accelerator_id!r} is not a table; describe each accelerator as [id] with its fields")
        if not _ID.match(accelerator_id) or accelerator_id == THIS_CPU:
            raise DataError(f"{where}: an id must be lower-case letters, digits, '.' and '-' (and not {THIS_CPU!r})")
        catalogue[accelerator_id] = _accelerator(accelerator_id, fields, where)
    return catalogue


def _accelerator(accelerator_id: str, fields: dict, where: str) -> Accelerator:
    unknown = sorted(set(fields) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise DataError(f"{where} has an unknown field {unknown[0]!r}; known fields: "
                        f"{', '.join([*_REQUIRED, *_OPTIONAL])}")
    for key, meaning in _REQUIRED.items():
        if key not in fields:
            raise DataError(f"{where} is missing {key} ({meaning}); add it")
    values = {**_OPTIONAL, **fields}
    peaks = _peaks(values["peak_tflops"], where)
    per_node = values["accelerators_per_node"]
    if not isinstance(per_node, int) or isinstance(per_node, bool) or per_node < 1:
        raise DataError(f"{where}: accelerators_per_node must be a whole number >= 1, got {per_node!r}")
    intra = _number(values, "intra_node_gb_per_s", where, allow_zero=True)
    inter = _number(values, "inter_node_gb_per_s", where, allow_zero=True)
    if per_node > 1 and intra == 0:
        raise DataError(f"{where} is inconsistent: accelerators_per_node is {per_node} but intra_node_gb_per_s "
                        f"is 0; give the bandwidth that joins them")
    power = values["power_watts"]
    if power is not None:
        power = _number(values, "power_watts", where)
    aliases, like, source = values["aliases"], values["like"], values["source"]
    if not isinstance(values["name"], str) or not values["name"]:
        raise DataError(f"{where}: name must be a non-empty string")
    if not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
        raise DataError(f"{where}: aliases must be a list of strings")
    if like is not None and not isinstance(like, str):
        raise DataError(f"{where}: like must be the id of another accelerator")
    return Accelerator(
        id=accelerator_id,
        name=values["name"],
        peak_flops=peaks,
        memory_bytes=_number(values, "memory_gb", where) * 1e9,
        memory_bandwidth=_number(values, "memory_bandwidth_gb_per_s", where) * 1e9,
        accelerators_per_node=per_node,
        intra_node_bandwidth=intra * 1e9,
        inter_node_bandwidth=inter * 1e9,
        intra_node_latency=_number(values, "intra_node_latency_us", where) * 1e-6,
        inter_node_latency=_number(values, "inter_node_latency_us", where) * 1e-6,
        power_watts=power,
        aliases=tuple(aliases),
        like=like,
        source=str(source),
    )


def _peaks(table: object, where: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise DataError(f"{where}: peak_tflops must be a table such as {{ bf16 = 989.4 }}")
    unknown = sorted(set(table) - set(PRECISIONS))
    if unknown:
        raise DataError(f"{where}: peak_tflops has an unknown precision {unknown[0]!r}; use {', '.join(PRECISIONS)}")
    if "bf16" not in table and "fp32" not in table:
        raise DataError(f"{where}: peak_tflops needs at least bf16 or fp32")
    peaks = {p: _number(table, p, f"{where} peak_tflops") * 1e12 for p in PRECISIONS if p in table}
    if "fp8" in peaks and "bf16" in peaks and peaks["fp8"] < peaks["bf16"]:
        raise DataError(f"{where} is inconsistent: peak_tflops.fp8 ({peaks['fp8'] / 1e12:g}) is below "
                        f"peak_tflops.bf16 ({peaks['bf16'] / 1e12:g}); fp8 units are never slower, check the figures")
    return peaks


def _number(fields: dict, key: str, where: str, allow_zero: bool = False) -> float:
    value = fields[key]
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        wanted = "a number >= 0" if allow_zero else "a positive number"
        raise DataError(f"{where}: {key} must be {wanted}, got {value!r}")
    return float(value)


def this_cpu(peak_flops: dict[str, float] | None = None, peak_source: str = "") -> Accelerator:
    """This machine's CPU as one accelerator, measured now: best matmul FLOP/s in bf16 and fp32
    (the same measurement `trainclock run` divides by for MFU) and memory copy bandwidth. With
    `peak_flops` (e.g. the median of what stored runs measured: steadier than one measurement on a
    busy machine) those peaks stand instead of measuring, and `peak_source` says where from."""
    given = dict(peak_flops or {})
    peaks = {p: given[p] if p in given else _matmul_peak(p) for p in ("bf16", "fp32")}
    source = (f"matmul peak: {peak_source}; tensor copy bandwidth measured on this machine" if given
              else "measured on this machine: torch matmul peak and tensor copy bandwidth")
    return replace(_measured_cpu(), peak_flops=peaks, source=source)


@cache
def _matmul_peak(precision: str) -> float:
    import torch

    from trainclock.device.peak import DTYPES, matmul_peak_flops

    return matmul_peak_flops(torch.device("cpu"), DTYPES[precision], seconds=0.3)


@cache
def _measured_cpu() -> Accelerator:
    """Everything of this CPU but its matmul peaks (this_cpu's)."""
    import torch

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Accelerator(
        id=THIS_CPU, name=f"this CPU ({torch.get_num_threads()} threads)", peak_flops={}, memory_bytes=float(memory),
        memory_bandwidth=_copy_bandwidth(), accelerators_per_node=1, intra_node_bandwidth=0.0,
        inter_node_bandwidth=0.0, intra_node_latency=0.0, inter_node_latency=0.0,
    )


def _copy_bandwidth(n_bytes: int = 1 << 27, repeats: int = 5) -> float:
    import torch

    src = torch.ones(n_bytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)  # touch the pages first: fresh memory is slow to map
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return 2 * n_bytes / best  # one read and one write per byte copied
