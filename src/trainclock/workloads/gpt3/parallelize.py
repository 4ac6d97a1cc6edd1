"""What is GPT-specific in parallelising it: the tensor-parallel plan, the blocks (FSDP2 units
and activation-checkpointing units) and the pipeline cut. The order in which they are applied,
and data parallelism, live in trainclock.distributed.parallelize; model.py stays free of all this."""

from __future__ import annotations

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism
from trainclock.errors import UsageError
from trainclock.workloads.gpt3.model import GPTShape
from trainclock.workloads.gpt3.pipeline import PipelinedGPT


def check_layout(model_shape: GPTShape, layout: Layout) -> None:
    if model_shape.n_layer < layout.pp * layout.vp:
        stages = f"pp x vp = {layout.pp} x {layout.vp} pipeline stages" if layout.vp > 1 else f"pipeline degree {layout.pp}"
        raise UsageError(f"{stages} exceed the {model_shape.n_layer} layers; lower --pp or --vp")
    if model_shape.n_head % layout.tp:
        raise UsageError(f"tensor parallel degree {layout.tp} must divide the {model_shape.n_head} attention heads")
    if layout.tp > 1 and layout.dp > 1 and not layout.fsdp:
        raise UsageError("tensor parallel with more than one data-parallel replica needs --fsdp (2-D FSDP2 x TP)")


def tensor_parallel(model: nn.Module, tp_mesh: DeviceMesh) -> None:
    # Megatron-style: column-parallel qkv and MLP up (each rank holds whole heads), row-parallel
    # output projections whose results are all-reduced; embeddings and LayerNorms replicated.
    plan = {"attn.qkv": ColwiseParallel(), "attn.proj": RowwiseParallel(),
            "mlp.up": ColwiseParallel(), "mlp.down": RowwiseParallel()}
    for block in model.blocks:
        parallelize_module(block, tp_mesh, plan)


PARALLELISM = ModelParallelism(
    tensor_parallel=tensor_parallel,
    blocks=lambda model: list(model.blocks),
    pipeline=lambda model, ctx, microbatches, materialize: PipelinedGPT(
        model, ctx, materialize.target if materialize else model.tok_emb.weight.device, microbatches, materialize),
)
