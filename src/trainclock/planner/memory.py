"""Memory per accelerator under a layout: weights, gradients, optimizer states and activations of
the fullest pipeline stage, against the accelerator's capacity.

Mixed precision keeps bf16 weights (plus an fp8 copy and its transpose when the matmuls run in
fp8), fp32 gradients (Megatron's main_grad) and fp32 master weights with two Adam moments.
Activations per layer follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", Table 2), in 16-bit: s*b*h*(34/t + 5*a*s/(h*t)) with sequence parallelism,
s*b*h*(10 + 24/t + 5*a*s/(h*t)) without; selective recomputation drops the 5*a*s/h attention term;
full recomputation keeps only each layer's input (2*s*b*h). Under the 1F1B schedule the first
stage holds min(m, p) micro-batches in flight, times (1 + (p-1)/(p*v)) when interleaved."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.planner.hardware import Accelerator
from trainclock.planner.layout import Layout
from trainclock.planner.model_terms import embedding_parameters, layer_parameters
from trainclock.workloads.gpt3.model import GPTShape

# Kept free for the runtime: driver context, allocator fragmentation, communication buffers.
RUNTIME_RESERVE = 0.10
LOGIT_BYTES = 4 * 2  # fp32 logits and their gradient, per vocabulary entry and token


@dataclass(frozen=True)
class MemoryBreakdown:
    stage: str  # which pipeline stage is fullest
    weights: float  # bytes
    gradients: float
    optimizer: float
    activations: float
    logits: float
    capacity: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits

    @property
    def usable(self) -> float:
        return self.capacity * (1 - RUNTIME_RESERVE)

    @property
    def fits(self) -> bool:
        return self.total <= self.usable

    def rows(self) -> list[tuple[str, float]]:
        return [("weights", self.weights), ("gradients", self.gradients), ("optimizer states", self.optimizer),
                ("activations", self.activations), ("logits", self.logits)]


def bytes_per_parameter(layout: Layout) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) bytes per parameter before any sharding."""
    if layout.precision == "fp32":
        return 4.0, 4.0, 8.0
    return (2.0 + (2.0 if layout.precision == "fp8" else 0.0)), 4.0, 12.0


def layer_activation_bytes(shape: GPTShape, seq_len: int, layout: Layout) -> float:
    """Activations one layer keeps for the backward pass of one micro-batch on one device."""
    s, b, h, a, t = seq_len, layout.micro_batch, shape.d_model, shape.n_head, layout.tp
    scale = 2.0 if layout.precision == "fp32" else 1.0  # the coefficients count 16-bit values
    if layout.recompute == "full":
        return scale * 2 * s * b * h / (t if layout.sequence_parallel else 1)
    per_token_width = 34 / t if layout.sequence_parallel else 10 + 24 / t
    attention_scores = 5 * a * s / (h * t) if layout.recompute == "none" else 0.0
    return scale * s * b * h * (per_token_width + attention_scores)


def memory_per_accelerator(shape: GPTShape, seq_len: int, global_batch_size: int, layout: Layout,
                           accelerator: Accelerator) -> MemoryBreakdown:
    m, p, v = layout.micro_batches(global_batch_size), layout.pp, layout.virtual_stages
    layers = shape.n_layer / p
    # Both ends hold the (tied) embedding: the first to look tokens up, the last for the logits.
    parameters = (layers * layer_parameters(shape) + embedding_parameters(shape)) / layout.tp
    weight_b, grad_b, optim_b = bytes_per_parameter(layout)
    weights = parameters * weight_b / (layout.dp if layout.zero == 3 else 1)
    if layout.zero == 3:  # one layer's full weights gathered, and the next one prefetched
        weights += 2 * layer_parameters(shape) / layout.tp * weight_b
    gradients = parameters * grad_b / (layout.dp if layout.zero >= 2 else 1)
    optimizer = parameters * optim_b / (layout.dp if layout.zero >= 1 else 1)

    per_layer = layer_activation_bytes(shape, seq_len, layout)
    if layout.recompute == "full":  # the layer being recomputed is briefly whole
        full = layer_activation_bytes(shape, seq_len, replace(layout, recompute="selective"))
    else:
        full = 0.0
    in_flight = min(m, p) * ((1 + (p - 1) / (p * v)) if v > 1 else 1)
    logits = layout.micro_batch * seq_len * shape.vocab_size * LOGIT_BYTES / layout.tp
    first = layers * in_flight * per_layer + full
    last = layers * per_layer + full
    if p == 1:
        return MemoryBreakdown("every device", weights, gradients, optimizer, last, logits, accelerator.memory_bytes)
    if first >= last + logits:
        return MemoryBreakdown("first stage", weights, gradients, optimizer, first, 0.0, accelerator.memory_bytes)
    return MemoryBreakdown("last stage", weights, gradients, optimizer, last, logits, accelerator.memory_bytes)
