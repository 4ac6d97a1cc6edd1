"""A parallel layout: how a model is split over accelerators (tensor, pipeline and data
parallelism), how its batch is cut into micro-batches, and the memory/time trade-offs chosen
(sequence parallelism, recomputation, optimizer sharding, overlap, precision).

Ranks are ordered tensor-parallel fastest, then data-parallel, then pipeline (Megatron's default):
a tensor-parallel group sits inside a node whenever it fits in one."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from trainclock.errors import UsageError
from trainclock.planner.hardware import PRECISIONS
from trainclock.workloads.gpt3.model import GPTShape

RECOMPUTE = ("none", "selective", "full")

# --layout keys and the Layout fields they set
_KEYS = {"tp": "tp", "pp": "pp", "dp": "dp", "mb": "micro_batch", "vp": "virtual_stages", "sp": "sequence_parallel",
         "recompute": "recompute", "zero": "zero", "overlap": "overlap", "precision": "precision"}
_BOOLS = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


@dataclass(frozen=True)
class Layout:
    tp: int = 1  # tensor-parallel ranks (Megatron column/row split of every matmul)
    pp: int = 1  # pipeline stages
    dp: int = 1  # data-parallel replicas
    micro_batch: int = 1  # sequences per forward/backward
    virtual_stages: int = 1  # model chunks per pipeline rank (interleaved 1F1B schedule)
    sequence_parallel: bool = False  # shard LayerNorm/dropout activations over the TP group
    recompute: str = "selective"  # none | selective (attention core) | full (whole layer)
    zero: int = 1  # 0 nothing sharded over DP; 1 optimizer states; 2 and gradients; 3 and weights (FSDP)
    overlap: bool = True  # DP reduce/gather and pipeline sends overlap compute (bucketed, asynchronous)
    precision: str = "bf16"  # of the matmuls: fp8, bf16 or fp32

    @property
    def accelerators(self) -> int:
        return self.tp * self.pp * self.dp

    def micro_batches(self, global_batch_size: int) -> int:
        """Micro-batches each pipeline runs per optimizer step (gradient accumulation steps)."""
        return global_batch_size // (self.dp * self.micro_batch)

    def tp_group(self) -> tuple[int, int]:
        """(rank stride, size) of a tensor-parallel group."""
        return 1, self.tp

    def dp_group(self) -> tuple[int, int]:
        return self.tp, self.dp

    def pp_group(self) -> tuple[int, int]:
        return self.tp * self.dp, self.pp

    def describe(self) -> str:
        onoff = {True: "on", False: "off"}
        return (f"tp={self.tp},pp={self.pp},dp={self.dp},vp={self.virtual_stages},mb={self.micro_batch},"
                f"sp={onoff[self.sequence_parallel]},recompute={self.recompute},zero={self.zero},"
                f"overlap={onoff[self.overlap]},precision={self.precision}")


    def short(self) -> str:
        """For tables: "tp4 pp8 dp112 vp12 mb1 sp sel z1 ovl fp8"."""
        flags = [*(["sp"] if self.sequence_parallel else []), {"none": "norc", "selective": "sel", "full": "full"}[self.recompute],
                 f"z{self.zero}", *(["ovl"] if self.overlap else []), self.precision]
        return (f"tp{self.tp} pp{self.pp} dp{self.dp} vp{self.virtual_stages} mb{self.micro_batch} " + " ".join(flags))


def spans_nodes(group: tuple[int, int], accelerators_per_node: int) -> bool:
    stride, size = group
    return size > 1 and stride * size > accelerators_per_node


def parse_layout(text: str) -> dict[str, object]:
    """The fields a `--layout` string sets, e.g. "tp=4,pp=8,vp=12,sp,precision=fp8": a partial
    layout; the rest comes from a template or the search."""
    given: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), (value.strip() if sep else "on")
        if key not in _KEYS:
            raise UsageError(f"unknown --layout key {key!r} in {item!r}; use {', '.join(_KEYS)} (e.g. tp=4,pp=8,dp=112)")
        name = _KEYS[key]
        if name in given:
            raise UsageError(f"--layout sets {key} twice; give each key once")
        given[name] = _value(name, key, value)
    return given


def _value(name: str, key: str, value: str) -> object:
    if name in ("sequence_parallel", "overlap"):
        if value.lower() not in _BOOLS:
            raise UsageError(f"--layout {key}={value}: write {key}=on or {key}=off")
        return _BOOLS[value.lower()]
    if name == "recompute":
        if value not in RECOMPUTE:
            raise UsageError(f"--layout recompute={value}: choose one of {', '.join(RECOMPUTE)}")
        return value
    if name == "precision":
        if value not in PRECISIONS:
            raise UsageError(f"--layout precision={value}: choose one of {', '.join(PRECISIONS)}")
        return value
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"--layout {key}={value}: {key} must be a whole number") from None
    if number < (0 if name == "zero" else 1) or (name == "zero" and number > 3):
        raise UsageError(f"--layout {key}={value}: {'zero must be 0, 1, 2 or 3' if name == 'zero' else f'{key} must be >= 1'}")
    return number


def complete(template: Layout, given: dict[str, object], count: int) -> Layout:
    """`template` with the `given` fields, and DP filling the accelerators that TP x PP leave."""
    unknown = set(given) - {f.name for f in fields(Layout)}
    if unknown:
        raise ValueError(f"not layout fields: {sorted(unknown)}")
    layout = replace(template, **given)
    if "dp" not in given:
        if count % (layout.tp * layout.pp):
            raise UsageError(f"{count} accelerators cannot be split into tp={layout.tp} x pp={layout.pp} groups; "
                             f"choose a count divisible by {layout.tp * layout.pp} or another layout")
        layout = replace(layout, dp=count // (layout.tp * layout.pp))
    if "sequence_parallel" not in given:
        layout = replace(layout, sequence_parallel=layout.tp > 1 and template.sequence_parallel)
    return layout


def layout_problems(layout: Layout, shape: GPTShape, count: int, global_batch_size: int) -> list[str]:
    """Why `layout` cannot train `shape` on `count` accelerators at this batch size (empty: it can).
    Each reason reads "<constraint>: <details>"."""
    problems = []
    if layout.accelerators != count:
        problems.append(f"accelerator count: tp x pp x dp = {layout.tp} x {layout.pp} x {layout.dp} "
                        f"= {layout.accelerators}, not {count}")
    if shape.n_head % layout.tp:
        problems.append(f"heads: tp={layout.tp} does not divide the {shape.n_head} attention heads")
    if shape.n_layer % (layout.pp * layout.virtual_stages):
        problems.append(f"layers: pp x vp = {layout.pp} x {layout.virtual_stages} does not divide the {shape.n_layer} layers")
    if layout.virtual_stages > 1 and layout.pp == 1:
        problems.append("interleaving: vp > 1 needs pp > 1")
    if layout.sequence_parallel and layout.tp == 1:
        problems.append("sequence parallel: sp needs tp > 1")
    if global_batch_size % (layout.dp * layout.micro_batch):
        problems.append(f"batch: global batch {global_batch_size} is not a multiple of "
                        f"dp x mb = {layout.dp} x {layout.micro_batch}")
    elif layout.virtual_stages > 1 and layout.micro_batches(global_batch_size) % layout.pp:
        # Megatron's interleaved schedule runs micro-batches in groups of pp
        problems.append(f"interleaving: the {layout.micro_batches(global_batch_size)} micro-batches per step "
                        f"are not a multiple of pp={layout.pp}")
    return problems


def require_valid(layout: Layout, shape: GPTShape, count: int, global_batch_size: int) -> None:
    problems = layout_problems(layout, shape, count, global_batch_size)
    if problems:
        raise UsageError(f"layout {layout.describe()} is not valid ({problems[0]}); change --layout, --count or --gbs")
