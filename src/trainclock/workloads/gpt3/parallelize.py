"""How a GPT model is parallelised, in torchtitan's fixed order: tensor parallel -> compile ->
data parallel (FSDP2 or DDP). model.py stays free of all of this."""

from __future__ import annotations

import torch
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.workloads.gpt3.model import GPT, GPTShape
from trainclock.workloads.gpt3.pipeline import PipelinedGPT


def check_layout(model_shape: GPTShape, layout: Layout) -> None:
    if model_shape.n_layer < layout.pp * layout.vp:
        stages = f"pp x vp = {layout.pp} x {layout.vp} pipeline stages" if layout.vp > 1 else f"pipeline degree {layout.pp}"
        raise UsageError(f"{stages} exceed the {model_shape.n_layer} layers; lower --pp or --vp")
    if model_shape.n_head % layout.tp:
        raise UsageError(f"tensor parallel degree {layout.tp} must divide the {model_shape.n_head} attention heads")
    if layout.tp > 1 and layout.dp > 1 and not layout.fsdp:
        raise UsageError("tensor parallel with more than one data-parallel replica needs --fsdp (2-D FSDP2 x TP)")


def parallelize(model: GPT, ctx: ParallelContext, compile: bool, device: torch.device,
                microbatches: int) -> torch.nn.Module:
    layout, mesh = ctx.layout, ctx.mesh
    if mesh is not None and layout.tp > 1:
        # Megatron-style: column-parallel qkv and MLP up (each rank holds whole heads), row-parallel
        # output projections whose results are all-reduced; embeddings and LayerNorms replicated.
        plan = {"attn.qkv": ColwiseParallel(), "attn.proj": RowwiseParallel(),
                "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], plan)
    if mesh is not None and layout.pp > 1:  # stages of the tensor-parallel blocks, data parallel inside
        return PipelinedGPT(model, ctx, device, microbatches)
    runnable: torch.nn.Module = torch.compile(model) if compile else model
    if mesh is None or layout.dp == 1:
        return runnable
    if layout.fsdp:
        dp_mesh = mesh["dp"]
        for block in model.blocks:
            fully_shard(block, mesh=dp_mesh)
        fully_shard(model, mesh=dp_mesh)
        return runnable
    # gradients live in the all-reduce buckets: no copy into them and back after every backward
    return DistributedDataParallel(runnable, process_group=mesh["dp"].get_group(), gradient_as_bucket_view=True)
