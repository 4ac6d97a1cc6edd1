"""What is GPT-specific in parallelising it: the tensor-parallel plan, the blocks (FSDP2 units
and activation-checkpointing units), the pipeline cut, and FP8 training's swap of the blocks' Linear
layers, done first (torchtitan's model converters). The order in which the rest are applied, and
data parallelism, live in trainclock.distributed.parallelize; model.py stays free of all this."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import Materialize, ModelParallelism, parallelize
from trainclock.errors import UsageError
from trainclock.workloads.gpt3.fp8 import convert as convert_to_fp8
from trainclock.workloads.gpt3.model import GPTShape
from trainclock.workloads.gpt3.pipeline import PipelinedGPT

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


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
    # (imported here, when a model is cut: torch.distributed.tensor takes half a second to import,
    # and the registry imports this module for every command)
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

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


def parallelize_gpt(model: nn.Module, ctx: ParallelContext, *, fp8: bool = False, compile: bool = False,
                    activation_checkpointing: bool = False, microbatches: int = 1,
                    materialize: Materialize | None = None) -> nn.Module:
    """The model as this rank trains it: with `fp8`, the blocks' Linear layers swapped for torchao's
    Float8Linear first (on the meta device too), so TP, recompute, the pipeline cut, compile and FSDP2
    all wrap float8 layers, as torchtitan converts before it parallelises."""
    if fp8:
        convert_to_fp8(model)
    return parallelize(model, ctx, PARALLELISM, compile=compile, activation_checkpointing=activation_checkpointing,
                       microbatches=microbatches, materialize=materialize)
