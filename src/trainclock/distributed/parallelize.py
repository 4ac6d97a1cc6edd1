"""Parallelism applied once for every workload, in torchtitan's fixed order: tensor parallel ->
activation checkpointing -> pipeline cut -> compile -> data parallel (FSDP2 or DDP). A workload
supplies only what is model-specific (ModelParallelism): its tensor-parallel plan, the modules
sharded or recomputed one by one, its pipeline cut.

A model too large to build whole on one node is built on the meta device (no memory) and cut
there; Materialize then gives each data-parallel unit its tensors on the real device: after FSDP2
has sharded it, so a rank allocates only its own shards, and before DDP, which needs real
replicas."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

from trainclock.distributed import dry_run
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.pipeline import PipelineModel
from trainclock.errors import UsageError
from trainclock.optim.ema import average_buffers

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import MixedPrecisionPolicy

# torch.distributed.fsdp (with torch.distributed.tensor, sympy) is imported where a model is sharded:
# every benchmark's workload module imports this one, and the registry imports those for every command

# Above this many parameters a model is built on the meta device and only this rank's shards are
# materialised: whole, its fp32 weights alone would take 4 GB in each of a node's 8 processes.
WHOLE_BUILD_MAX_PARAMETERS = 1_000_000_000


def _no_units(model: nn.Module) -> list[nn.Module]:
    return []


@dataclass(frozen=True)
class Materialize:
    """How a model built on the meta device gets its tensors once cut into this rank's shards:
    moved to `device` (uninitialised) and initialised by `init`, the workload's own initialisation,
    which must work on any part of the model and on sharded (DTensor) parameters (torch.nn.init
    does: each rank draws its local shard). On the meta device the model stays there; during a
    dry run (distributed.dry_run) it becomes fake tensors: shapes and bytes, no memory, no values."""

    device: torch.device
    init: Callable[[nn.Module], None] | None = None  # None: only for meta devices and dry runs

    @property
    def gives_values(self) -> bool:
        """Whether the materialised tensors hold initialised values (not on meta, not fake)."""
        return self.device.type != "meta" and dry_run.fake_tensor_mode() is None

    @property
    def target(self) -> torch.device:
        """The device the model's tensors end up on (a dry run's fake tensors claim the CPU)."""
        return dry_run.FAKE_DEVICE if dry_run.fake_tensor_mode() is not None else self.device

    def __call__(self, module: nn.Module) -> None:
        fake = dry_run.fake_tensor_mode()
        if fake is not None:
            with fake:
                _to_empty_keeping_ties(module, self.target)
            return
        if self.device.type == "meta":
            return
        if self.init is None:
            raise ValueError(f"a model built on the meta device needs its workload's initialisation to be "
                             f"materialised on {self.device}")
        _to_empty_keeping_ties(module, self.device)
        with torch.no_grad():
            self.init(module)


def builds_on_meta(parameter_count: int, device: torch.device) -> bool:
    """Whether a model of this size is built on the meta device for `device` (always for a meta
    device: a dry run). Smaller models are built whole and then cut, as before, so their weights
    are the same under every layout."""
    return device.type == "meta" or parameter_count > WHOLE_BUILD_MAX_PARAMETERS


@dataclass(frozen=True)
class ModelParallelism:
    # applies the tensor-parallel plan in place over the "tp" mesh (None: the model has none)
    tensor_parallel: Callable[[nn.Module, DeviceMesh], None] | None = None
    # modules sharded by FSDP2 one by one before the root (transformer blocks), and recomputed
    # in backward under activation checkpointing
    blocks: Callable[[nn.Module], Iterable[nn.Module]] = _no_units
    # cuts the model into this rank's stages, each data parallel (see data_parallel_stage) and
    # materialised there when the model was built on the meta device; None: no pipeline
    pipeline: Callable[[nn.Module, ParallelContext, int, Materialize | None], PipelineModel] | None = None
    # the layout a convolutional model's weights take on a GPU (torch.channels_last, channels_last_3d):
    # cuDNN's fastest convolutions (tensor cores) are NHWC, and a convolution follows its weight's layout
    gpu_memory_format: torch.memory_format | None = None


def build_parallelized(make: Callable[[], nn.Module], device: torch.device, ctx: ParallelContext,
                       parallelism: ModelParallelism, *, compile: bool = False,
                       activation_checkpointing: bool = False) -> nn.Module:
    """parallelize(make()) on `device`: built whole and moved there, or, for a meta device (a dry
    run), built on meta and cut there (Materialize(meta) keeps it so; a dry run makes fake tensors)."""
    on_meta = device.type == "meta"
    with torch.device("meta") if on_meta else contextlib.nullcontext():
        model = make()
    return parallelize(model if on_meta else model.to(device), ctx, parallelism, compile=compile,
                       activation_checkpointing=activation_checkpointing,
                       materialize=Materialize(device) if on_meta else None)


def parallelize(model: nn.Module, ctx: ParallelContext, parallelism: ModelParallelism, *, compile: bool = False,
                activation_checkpointing: bool = False, microbatches: int = 1,
                materialize: Materialize | None = None) -> nn.Module:
    """The model as this rank trains it: `model` on its device, or built on the meta device and
    given `materialize`."""
    layout, mesh = ctx.layout, ctx.mesh
    if mesh is not None and layout.tp > 1:
        if parallelism.tensor_parallel is None:
            raise UsageError("this benchmark has no tensor-parallel plan; run it without --tp")
        parallelism.tensor_parallel(model, mesh["tp"])
    if activation_checkpointing:
        for block in parallelism.blocks(model):
            recompute_in_backward(block)
    if mesh is not None and layout.pp > 1:
        if parallelism.pipeline is None:
            raise UsageError("this benchmark has no pipeline cut; run it without --pp")
        return parallelism.pipeline(model, ctx, microbatches, materialize)
    to_gpu_memory_format(model, parallelism)
    runnable: nn.Module = torch.compile(model) if compile else model
    if mesh is None or layout.dp == 1:
        _materialize(model, materialize)
        return runnable
    if layout.fsdp:
        shard(model, ctx, parallelism.blocks(model))
        _materialize(model, materialize)
        return runnable
    _materialize(model, materialize)
    if _on_meta(model):
        return runnable  # DDP needs real tensors; a replica left on the meta device is what each rank holds
    data_parallel_ignored(runnable, average_buffers(runnable))
    # gradients live in the all-reduce buckets: no copy into them and back after every backward
    return DistributedDataParallel(runnable, process_group=mesh["dp"].get_group(), gradient_as_bucket_view=True)


def data_parallel_ignored(model: nn.Module, names: Sequence[str]) -> None:
    """Tell DDP (wrapping `model` later) to neither broadcast nor all-reduce these parameters and
    buffers, beside those named before (a sharded embedding's tables, a weight average)."""
    before = list(getattr(model, "_ddp_params_and_buffers_to_ignore", ()))
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, before + [n for n in names if n not in before])


def data_parallel_stage(stage: nn.Module, ctx: ParallelContext, blocks: Iterable[nn.Module],
                        materialize: Materialize | None = None) -> nn.Module:
    """A pipeline stage replicated (DDP) or sharded (FSDP2) over the data-parallel mesh, and
    materialised if it was built on the meta device."""
    if ctx.layout.dp == 1:
        _materialize(stage, materialize)
        return stage
    if ctx.layout.fsdp:
        shard(stage, ctx, blocks)
        _materialize(stage, materialize)
        return stage
    _materialize(stage, materialize)
    if _on_meta(stage):
        return stage
    # find_unused_parameters keeps DDP from rebuilding its buckets in order of gradient arrival:
    # the rebuild counts every micro-batch's backward and fails an internal assert once a step has
    # two or more micro-batches (torch 2.13); the stage already hands DDP its outputs to search.
    return DistributedDataParallel(stage, process_group=ctx.mesh["dp"].get_group(), find_unused_parameters=True)


def to_gpu_memory_format(model: nn.Module, parallelism: ModelParallelism) -> None:
    """The model's weights in its GPU memory format, on a GPU only: CPU runs keep their layout."""
    on_gpu = any(p.device.type == "cuda" for p in model.parameters())
    if parallelism.gpu_memory_format is not None and on_gpu:
        model.to(memory_format=parallelism.gpu_memory_format)


def mixed_precision(precision: str) -> MixedPrecisionPolicy:
    """FSDP2's casts for the run's precision: a bf16 run all-gathers its fp32 shards as bf16 (half
    the traffic and the gathered memory; autocast would cast them to bf16 for every matmul anyway)
    and reduce-scatters gradients in fp32, so the fp32 shards the optimizer updates lose nothing to
    the reduction; an fp32 run keeps fp32 throughout."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if precision == "bf16":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy()


def shard(root: nn.Module, ctx: ParallelContext, blocks: Iterable[nn.Module]) -> None:
    """FSDP2: each block is its own all-gather unit, then the root holds the rest."""
    from torch.distributed.fsdp import fully_shard

    dp_mesh = ctx.mesh["dp"]
    policy = mixed_precision(ctx.layout.precision)
    for block in blocks:
        fully_shard(block, mesh=dp_mesh, mp_policy=policy)
    fully_shard(root, mesh=dp_mesh, mp_policy=policy)


def recompute_in_backward(module: nn.Module) -> None:
    """Activation checkpointing: keep only the module's inputs and recompute its activations in
    backward. The forward is replaced on the instance, not wrapped in another module, so
    parameter names (and so checkpoints) stay those of the plain model."""
    forward = module.forward
    module.forward = functools.partial(checkpoint, forward, use_reentrant=False)


def _materialize(module: nn.Module, materialize: Materialize | None) -> None:
    if materialize is not None and _on_meta(module):
        materialize(module)


def _on_meta(module: nn.Module) -> bool:
    return any(p.is_meta for p in module.parameters())


def _to_empty_keeping_ties(module: nn.Module, device: torch.device) -> None:
    """module.to_empty, with parameters shared by several modules (tied embeddings) still shared:
    to_empty gives each place its own tensor where the new one is of another type (a fake tensor)."""
    places: dict[int, list[tuple[nn.Module, str]]] = {}
    for owner in module.modules():
        for name, p in owner._parameters.items():
            if p is not None:
                places.setdefault(id(p), []).append((owner, name))
    module.to_empty(device=device)
    for (first, first_name), *others in (where for where in places.values() if len(where) > 1):
        for owner, name in others:
            owner._parameters[name] = first._parameters[first_name]
