"""The parts of a GPT-3 member's FLOPs and parameters the planner splits across devices, derived
from GPTShape's own formulas (workloads/gpt3/model.py) rather than written again here. Cached:
the layout search asks for them thousands of times."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from trainclock.workloads.gpt3.model import GPTShape


@cache
def attention_flops_per_token(shape: GPTShape, seq_len: int) -> float:
    """Training FLOPs per token of the attention scores and weighted sum (the term that grows with
    the sequence): flops_per_token is 6N + 12*L*D*T, linear in T, so f(2T) - f(T) is that term."""
    return shape.flops_per_token(2 * seq_len) - shape.flops_per_token(seq_len)


@cache
def parameter_flops_per_token(shape: GPTShape, seq_len: int) -> float:
    """Training FLOPs per token of the matmuls with weights, 6N (forward 2N, backward 4N)."""
    return shape.flops_per_token(seq_len) - attention_flops_per_token(shape, seq_len)


@cache
def embedding_parameters(shape: GPTShape) -> int:
    """Token and position embeddings and the final LayerNorm: what is left with no layers."""
    return replace(shape, n_layer=0).parameter_count()


@cache
def layer_parameters(shape: GPTShape) -> float:
    """Parameters of one transformer layer."""
    return (shape.parameter_count() - embedding_parameters(shape)) / shape.n_layer
