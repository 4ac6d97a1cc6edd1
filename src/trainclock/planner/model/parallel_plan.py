"""A plan: how a model is laid out over accelerators (the Layout `trainclock run` takes: tensor,
pipeline and data parallelism, FSDP, the pipeline schedule) plus what the planner also chooses
and `trainclock run` does not (yet): micro-batch, sequence parallelism, recomputation, optimizer
sharding short of FSDP, overlap and the matmul precision.

Ranks follow the layout's mesh: tensor-parallel fastest, then data-parallel, then pipeline
(Megatron's default), so a tensor-parallel group sits inside a node whenever it fits in one."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.planner.model.hardware import PRECISIONS
from trainclock.workload.cost_model import RECOMPUTE

LAYOUT_FIELDS = ("tp", "pp", "dp", "vp")  # --layout keys that set the Layout itself
# --layout keys and the fields they set (of the Layout, or of the Plan)
_KEYS = {"tp": "tp", "pp": "pp", "dp": "dp", "mb": "micro_batch", "vp": "vp", "sp": "sequence_parallel",
         "recompute": "recompute", "zero": "zero", "overlap": "overlap", "gather": "gather_overlap",
         "precision": "precision"}
_BOOLS = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


@dataclass(frozen=True)
class Plan:
    """`zero` decides the layout's FSDP (zero 3 shards weights too: FSDP) and `layout.vp` its
    schedule (interleaved 1F1B with vp > 1, else 1F1B: the schedules the step-time model knows);
    both are set here, whatever the layout given said."""

    layout: Layout = field(default_factory=Layout)
    micro_batch: int = 1  # samples per forward/backward
    sequence_parallel: bool = False  # shard LayerNorm/dropout activations over the TP group
    recompute: str = "selective"  # none | selective (the cheap-to-recompute part) | full (whole layer)
    zero: int = 1  # 0 nothing sharded over DP; 1 optimizer states; 2 and gradients; 3 and weights (FSDP)
    overlap: bool = True  # DP reduce/gather and pipeline sends overlap compute (bucketed, asynchronous)
    # With zero 1/2 and overlap: the updated weights' all-gather hides behind the next forward, or
    # (off) runs whole after the optimizer step, as distributed optimizers did before they could
    # overlap it (Megatron's --overlap-param-gather).
    gather_overlap: bool = True
    precision: str = "bf16"  # of the matmuls with weights: fp8, bf16 or fp32

    def __post_init__(self) -> None:
        schedule = "interleaved-1f1b" if self.layout.vp > 1 else "1f1b"
        if (self.layout.fsdp, self.layout.pp_schedule) != (self.zero == 3, schedule):
            object.__setattr__(self, "layout", replace(self.layout, fsdp=self.zero == 3, pp_schedule=schedule))

    @property
    def accelerators(self) -> int:
        return self.layout.world_size

    def micro_batches(self, global_batch_size: int) -> int:
        """Micro-batches each pipeline runs per optimizer step (gradient accumulation steps)."""
        return global_batch_size // (self.layout.dp * self.micro_batch)

    def describe(self) -> str:
        """As --layout takes it."""
        onoff = {True: "on", False: "off"}
        layout = self.layout
        return (f"tp={layout.tp},pp={layout.pp},dp={layout.dp},vp={layout.vp},mb={self.micro_batch},"
                f"sp={onoff[self.sequence_parallel]},recompute={self.recompute},zero={self.zero},"
                f"overlap={onoff[self.overlap]},{'' if self.gather_overlap else 'gather=off,'}precision={self.precision}")

    def short(self) -> str:
        """For tables: "tp4 pp8 dp112 vp12 mb1 sp sel z1 ovl fp8"."""
        layout = self.layout
        flags = [*(["sp"] if self.sequence_parallel else []), {"none": "norc", "selective": "sel", "full": "full"}[self.recompute],
                 f"z{self.zero}", *(["ovl"] if self.overlap else []), *([] if self.gather_overlap else ["ag-after"]),
                 self.precision]
        return f"tp{layout.tp} pp{layout.pp} dp{layout.dp} vp{layout.vp} mb{self.micro_batch} " + " ".join(flags)


def spans_nodes(group: tuple[int, int], accelerators_per_node: int) -> bool:
    stride, size = group
    return size > 1 and stride * size > accelerators_per_node


def parse_layout(text: str) -> dict[str, object]:
    """The fields a `--layout` string sets, e.g. "tp=4,pp=8,vp=12,sp,precision=fp8": a partial
    plan; the rest comes from a template or the search."""
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
    if name in ("sequence_parallel", "overlap", "gather_overlap"):
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


def with_fields(template: Plan, given: dict[str, object]) -> Plan:
    """`template` with the `given` fields (of its Layout or its own), as parse_layout names them."""
    unknown = set(given) - set(LAYOUT_FIELDS) - {f.name for f in fields(Plan)} - {"layout"}
    if unknown:
        raise ValueError(f"not plan fields: {sorted(unknown)}")
    layout = replace(template.layout, **{k: v for k, v in given.items() if k in LAYOUT_FIELDS})
    return replace(template, layout=layout, **{k: v for k, v in given.items() if k not in LAYOUT_FIELDS})


def complete(template: Plan, given: dict[str, object], count: int) -> Plan:
    """`template` with the `given` fields, and DP filling the accelerators that TP x PP leave."""
    plan = with_fields(template, given)
    tp, pp = plan.layout.tp, plan.layout.pp
    if "dp" not in given:
        if count % (tp * pp):
            raise UsageError(f"{count} accelerators cannot be split into tp={tp} x pp={pp} groups; "
                             f"choose a count divisible by {tp * pp} or another layout")
        plan = replace(plan, layout=replace(plan.layout, dp=count // (tp * pp)))
    if "sequence_parallel" not in given:
        plan = replace(plan, sequence_parallel=tp > 1 and template.sequence_parallel)
    return plan
