"""A dry run: this one process stands in for rank 0 of a whole job on torch's fake process-group
backend (every collective returns at once, without data, as torchtitan's fake-backend mode runs),
builds the model at the job's layout on the meta device, materialises rank 0's shards as fake
tensors (shapes and bytes, no memory, no values) and measures what the rank holds: parameters,
gradients and optimizer state after one step, the activations one micro-batch keeps for its
backward, and the peak of its forward and backward. Nothing is allocated or written."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.env import DistEnv
from trainclock.distributed.layout import Layout
from trainclock.distributed.local_shards import local_part
from trainclock.errors import UsageError

FAKE_DEVICE = torch.device("cpu")  # the device fake tensors claim: the inputs a workload makes go there
_fake_mode = None  # the FakeTensorMode of the dry run under way, if any
# a micro-batch's loss on made-up inputs, or one per pipeline stage the rank holds (None: not measurable)
SampleLoss = Callable[[nn.Module], "torch.Tensor | Sequence[torch.Tensor] | None"]


def fake_tensor_mode():
    """The dry run's FakeTensorMode while one runs (None otherwise): parallelize materialises a
    meta-built model into it instead of onto a device."""
    return _fake_mode


@contextlib.contextmanager
def fake_job(layout: Layout) -> Iterator[ParallelContext]:
    """This process as rank 0 of `layout`'s world on the fake backend, with the job's device mesh."""
    global _fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise UsageError("a dry run needs a process of its own; run it without torchrun")
    world = layout.world_size
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    # parameters are fake tensors; the mesh and the inputs the workload makes need not be
    _fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        env = DistEnv(rank=0, world_size=world, local_rank=0, restart_count=0)
        yield ParallelContext(env, layout, layout.mesh("cpu") if world > 1 else None)
    finally:
        _fake_mode = None
        dist.destroy_process_group()


@dataclass(frozen=True)
class RankMemory:
    """Bytes one rank holds, measured on fake tensors."""

    parameters: int  # this rank's shards of the weights (and buffers), in their stored dtype
    gradients: int  # after one backward, as the optimizer reads them
    optimizer: int  # the optimizer's state after one step
    activations: int | None  # what one micro-batch keeps for its backward (None: not measured)
    in_flight: int  # micro-batches whose activations the rank holds at once (pipeline schedules)
    working: int | None  # the rest of the peak: gathered parameters, backward temporaries (None: not measured)


def run(layout: Layout, build: Callable[[ParallelContext], nn.Module],
        build_optimizer: Callable[[nn.Module], torch.optim.Optimizer], sample_loss: SampleLoss, microbatches: int,
        autocast_dtype: torch.dtype | None) -> RankMemory:
    """Rank 0's memory in a job of `layout`: `build` makes the model for a context (on the meta
    device), `microbatches` is how many each data-parallel rank runs per step."""
    with fake_job(layout) as ctx:
        model = build(ctx)
        return measure(model, build_optimizer, sample_loss, micro_batches_in_flight(layout, microbatches),
                       autocast_dtype)


def micro_batches_in_flight(layout: Layout, microbatches: int) -> int:
    """Micro-batches whose activations the first pipeline rank holds at the peak of a step: all
    of them under GPipe, min(m, pp) under 1F1B, and under interleaved 1F1B about (1 + (pp-1)/(pp*vp))
    as many again of its vp stages' share (Narayanan et al. 2021), rounded up."""
    p, v, m = layout.pp, layout.vp, microbatches
    if p == 1:
        return 1
    if layout.pp_schedule == "gpipe":
        return m
    return -(-min(m, p) * (p * v + p - 1) // (p * v)) if v > 1 else min(m, p)


@contextlib.contextmanager
def _hookable(model: nn.Module) -> Iterator[None]:
    """MemTracker puts a gradient hook on every parameter of a module that runs forward, which a
    frozen parameter refuses: frozen weights (a text encoder beside the trained UNet) take
    requires_grad for the forward only. A frozen module's forward runs under no_grad in the models
    that have one, so no graph reaches them; they are frozen again before the backward, and the
    optimizer was built without them."""
    frozen = [p for p in model.parameters() if not p.requires_grad]
    for p in frozen:
        p.requires_grad_(True)
    try:
        yield
    finally:
        for p in frozen:
            p.requires_grad_(False)


def measure(model: nn.Module, build_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
            sample_loss: SampleLoss, in_flight: int, autocast_dtype: torch.dtype | None) -> RankMemory:
    """What `model` (materialised as fake tensors) holds on this rank through one training step of
    one micro-batch: `sample_loss` runs its forward on made-up inputs (None: the model's work
    depends on its data's values, so activations are not measured and every gradient is made;
    several losses: one per pipeline stage the rank holds, all forwards before the backwards, each
    backward apart, as a schedule runs them). The peak is taken over forward and backward: a fused
    optimizer step adds its state only (fake kernels would allocate outputs a real in-place step
    does not)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    if _fake_mode is None:
        raise RuntimeError("measure runs inside fake_job")
    parameters = _unique(model.parameters())
    steady = _bytes(parameters) + _bytes(model.buffers())
    activations = working = None
    with _fake_mode:
        optimizer = build_optimizer(model)
        tracker = MemTracker()
        tracker.track_external(model)
        with tracker, _autocast(autocast_dtype), _no_gradient_sync(model), _FlashAttention():
            with _hookable(model):
                loss = sample_loss(model)
            if loss is not None:
                activations = _snapshot(tracker, "current")["Activation"]
                for stage_loss in reversed([loss] if isinstance(loss, torch.Tensor) else list(loss)):
                    stage_loss.backward()
        if loss is None:
            for p in parameters:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        gradients = _bytes(p.grad for p in parameters if p.grad is not None)
        optimizer.step()
        state = _bytes(t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor))
    if activations is not None:
        peak = _snapshot(tracker, "peak")
        working = max(0, peak["Total"] - steady - peak["Gradient"] - activations)
    return RankMemory(steady, gradients, state, activations, in_flight, working)


def _unique(params) -> list[torch.Tensor]:
    seen, unique = set(), []
    for p in params:
        if id(p) not in seen:
            seen.add(id(p))
            unique.append(p)
    return unique


def _bytes(tensors) -> int:
    """Bytes of this rank's part of each tensor (a DTensor's local shard)."""
    total = 0
    for t in tensors:
        local = local_part(t)
        total += local.numel() * local.element_size()
    return total


def _snapshot(tracker, which: str) -> dict[str, int]:
    """MemTracker's bytes by kind ("Activation", "Gradient", "Total", ...), all devices together."""
    summed: dict[str, int] = {}
    for by_kind in tracker.get_tracker_snapshot(which).values():
        for kind, size in by_kind.items():
            key = getattr(kind, "value", kind)
            summed[key] = summed.get(key, 0) + size
    return summed


class _FlashAttention(TorchFunctionMode):
    """Attention kept for backward as a GPU's flash kernel keeps it (its inputs, output and
    log-sum-exp; dropout as a saved seed), not as the CPU's math fallback for masks and dropout
    keeps it (every score matrix: 3 GB per layer of a 1,024-wide, 16-head encoder at micro-batch 48): the dry run runs on
    the CPU's kernels but speaks for an accelerator's memory. The CPU's flash kernel keeps the same
    tensors; dropout is left out of it (fake tensors draw nothing)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.scaled_dot_product_attention:
            return func(*args, **kwargs)
        query, key, value, *rest = args
        mask = kwargs.get("attn_mask", rest[0] if rest else None)
        is_causal = kwargs.get("is_causal", rest[2] if len(rest) > 2 else False)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.to(query.dtype)
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, 0.0, is_causal, attn_mask=mask, scale=kwargs.get("scale"))[0]


def _autocast(dtype: torch.dtype | None):
    return torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()


def _no_gradient_sync(model: nn.Module):
    """DDP's gradient all-reduce cannot run on the fake backend (its result is nothing); the
    gradients it would average are the same bytes."""
    return model.no_sync() if hasattr(model, "no_sync") else contextlib.nullcontext()


@dataclass(frozen=True)
class Estimate:
    """Another account of the same rank's bytes, row by row (the planner's memory model)."""

    parameters: float
    gradients: float
    optimizer: float
    activations: float
    output: float  # the model's output on the last pipeline stage (GPT: logits), apart from activations

    @property
    def total(self) -> float:
        return self.parameters + self.gradients + self.optimizer + self.activations + self.output


@dataclass(frozen=True)
class Verdict:
    total: float  # bytes, measured where the dry run could (the estimate's activations where not)
    usable: float
    largest: str  # the row that takes most

    @property
    def fits(self) -> bool:
        return self.total <= self.usable


def table(memory: RankMemory, estimate: Estimate | None, usable: float) -> tuple[list[str], Verdict]:
    """The per-rank table, in GB, beside the estimate's figures, and whether the total fits."""
    measured_activations = memory.activations is not None
    activations = memory.in_flight * memory.activations if measured_activations else None
    if not measured_activations and estimate is not None:
        activations = estimate.activations + estimate.output
    rows: list[tuple[str, float | None, float | None, str]] = [
        ("parameters (rank 0's shards)", memory.parameters, estimate and estimate.parameters, ""),
        ("gradients", memory.gradients, estimate and estimate.gradients, ""),
        ("optimizer state", memory.optimizer, estimate and estimate.optimizer, ""),
        (f"activations ({memory.in_flight} micro-batch{'es' if memory.in_flight > 1 else ''} in flight)",
         activations, estimate and estimate.activations, "" if measured_activations else "  (the planner's)"),
        ("working: gathered weights, backward temporaries", memory.working, None, ""),
    ]
    if estimate is not None and estimate.output:
        rows.append(("output on the last stage (logits)", None, estimate.output, ""))
    total = sum(r[1] for r in rows if r[1] is not None)
    rows.append(("total", total, estimate and estimate.total, ""))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'per-rank memory, GB':<{width}}  {'dry run':>10}  {'planner':>10}"]
    for label, value, model, source in rows:
        lines.append(f"{label:<{width}}  {_gb(value):>10}  {_gb(model):>10}{source}")
    largest = max(rows[:-1], key=lambda r: r[1] or 0.0)[0]
    return lines, Verdict(total, usable, largest)


def _gb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:,.2f}"
