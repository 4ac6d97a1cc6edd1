"""Parallelism applied once for every workload, in torchtitan's fixed order: tensor parallel ->
activation checkpointing -> pipeline cut -> compile -> data parallel (FSDP2 or DDP). A workload
supplies only what is model-specific (ModelParallelism): its tensor-parallel plan, the modules
sharded or recomputed one by one, its pipeline cut."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.pipeline import PipelineModel
from trainclock.errors import UsageError


def _no_units(model: nn.Module) -> list[nn.Module]:
    return []


@dataclass(frozen=True)
class ModelParallelism:
    # applies the tensor-parallel plan in place over the "tp" mesh (None: the model has none)
    tensor_parallel: Callable[[nn.Module, DeviceMesh], None] | None = None
    # modules sharded by FSDP2 one by one before the root (transformer blocks), and recomputed
    # in backward under activation checkpointing
    blocks: Callable[[nn.Module], Iterable[nn.Module]] = _no_units
    # cuts the model into this rank's stages, each data parallel (see data_parallel); None: no pipeline
    pipeline: Callable[[nn.Module, ParallelContext, int], PipelineModel] | None = None


def parallelize(model: nn.Module, ctx: ParallelContext, parallelism: ModelParallelism, *, compile: bool = False,
                activation_checkpointing: bool = False, microbatches: int = 1) -> nn.Module:
    """The model as this rank trains it: `model` must already be on its device."""
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
        return parallelism.pipeline(model, ctx, microbatches)
    runnable: nn.Module = torch.compile(model) if compile else model
    if mesh is None or layout.dp == 1:
        return runnable
    if layout.fsdp:
        shard(model, ctx, parallelism.blocks(model))
        return runnable
    # gradients live in the all-reduce buckets: no copy into them and back after every backward
    return DistributedDataParallel(runnable, process_group=mesh["dp"].get_group(), gradient_as_bucket_view=True)


def data_parallel_stage(stage: nn.Module, ctx: ParallelContext, blocks: Iterable[nn.Module]) -> nn.Module:
    """A pipeline stage replicated (DDP) or sharded (FSDP2) over the data-parallel mesh."""
    if ctx.layout.dp == 1:
        return stage
    if ctx.layout.fsdp:
        shard(stage, ctx, blocks)
        return stage
    # find_unused_parameters keeps DDP from rebuilding its buckets in order of gradient arrival:
    # the rebuild counts every micro-batch's backward and fails an internal assert once a step has
    # two or more micro-batches (torch 2.13); the stage already hands DDP its outputs to search.
    return DistributedDataParallel(stage, process_group=ctx.mesh["dp"].get_group(), find_unused_parameters=True)


def shard(root: nn.Module, ctx: ParallelContext, blocks: Iterable[nn.Module]) -> None:
    """FSDP2: each block is its own all-gather unit, then the root holds the rest."""
    dp_mesh = ctx.mesh["dp"]
    for block in blocks:
        fully_shard(block, mesh=dp_mesh)
    fully_shard(root, mesh=dp_mesh)


def recompute_in_backward(module: nn.Module) -> None:
    """Activation checkpointing: keep only the module's inputs and recompute its activations in
    backward. The forward is replaced on the instance, not wrapped in another module, so
    parameter names (and so checkpoints) stay those of the plain model."""
    forward = module.forward
    module.forward = functools.partial(checkpoint, forward, use_reentrant=False)
