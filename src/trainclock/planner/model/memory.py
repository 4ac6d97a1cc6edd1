"""Memory per accelerator under a plan: weights, gradients, optimizer states and activations of
the fullest pipeline stage, against the accelerator's capacity.

Mixed precision keeps bf16 weights (plus an fp8 copy and its transpose when the matmuls run in
fp8), fp32 gradients (Megatron's main_grad) and fp32 master weights beside the optimizer's own
state; fp32 training keeps fp32 weights and gradients and no master copy. Activations per layer
come from the workload's cost model (in 16-bit values; doubled in fp32). Under the 1F1B schedule
the first stage holds min(m, p) micro-batches in flight, times (1 + (p-1)/(p*v)) when interleaved.
Parameters the model shards itself (cost.sharded_parameters: embedding tables) are split over
every device, ZeRO or not; with a sparse update their gradients are only the rows a step touches.
Frozen parameters (a LoRA fine-tune's base weights: all but cost.trained_parameter_count) keep only
their weights at the plan's precision."""

from __future__ import annotations

from dataclasses import dataclass

from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.parallel_plan import Plan
from trainclock.workload.cost_model import WorkloadCost

# Kept free for the runtime: driver context, allocator fragmentation, communication buffers.
RUNTIME_RESERVE = 0.10


@dataclass(frozen=True)
class MemoryBreakdown:
    stage: str  # which pipeline stage is fullest
    weights: float  # bytes
    gradients: float
    optimizer: float
    activations: float
    logits: float  # the model's output on the last stage (GPT: logits)
    capacity: float
    sharded: float = 0.0  # bytes of the model-parallel parameters (weights, gradients, states): in the above

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


def bytes_per_parameter(plan: Plan, cost: WorkloadCost) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) bytes per parameter before any sharding; the last two
    per trained parameter."""
    if plan.precision == "fp32":
        return 4.0, 4.0, float(cost.optimizer_state_bytes_per_parameter)
    master = 4.0  # the fp32 copy the optimizer updates
    return (2.0 + (2.0 if plan.precision == "fp8" else 0.0)), 4.0, master + cost.optimizer_state_bytes_per_parameter


def trained_share(cost: WorkloadCost) -> float:
    """The fraction of the replicated (not model-sharded) parameters that train: 1 unless the model
    freezes some. The sharded embedding tables are counted as trained; the frozen rest is taken to
    spread over the layers as the parameters do, so every pipeline stage and shard gets this share."""
    trained, total, sharded = cost.trained_parameter_count, cost.parameter_count, cost.sharded_parameters
    if trained >= total:
        return 1.0
    return max(0.0, trained - sharded) / (total - sharded)


def layer_activation_bytes(cost: WorkloadCost, plan: Plan, recompute: str | None = None) -> float:
    """Activations one layer keeps for the backward pass of one micro-batch on one device."""
    scale = 2.0 if plan.precision == "fp32" else 1.0  # the cost model counts 16-bit values
    return scale * cost.layer_activation_bytes(plan.micro_batch, plan.layout.tp, plan.sequence_parallel,
                                               recompute or plan.recompute)


def memory_per_accelerator(cost: WorkloadCost, global_batch_size: int, plan: Plan,
                           accelerator: Accelerator) -> MemoryBreakdown:
    layout = plan.layout
    m, p, v = plan.micro_batches(global_batch_size), layout.pp, layout.vp
    layers = cost.layers / p
    # the fullest stage holds every parameter outside the layers (GPT: both ends hold the tied embedding)
    sharded = cost.sharded_parameters
    parameters = (layers * cost.layer_parameters + cost.other_parameters - sharded) / layout.tp
    weight_b, grad_b, optim_b = bytes_per_parameter(plan, cost)
    weights = parameters * weight_b / (layout.dp if plan.zero == 3 else 1)
    if plan.zero == 3:  # one layer's full weights gathered, and the next one prefetched
        weights += 2 * cost.layer_parameters / layout.tp * weight_b
    trained = parameters * trained_share(cost)
    gradients = trained * grad_b / (layout.dp if plan.zero >= 2 else 1)
    optimizer = trained * optim_b / (layout.dp if plan.zero >= 1 else 1)
    own = sharded / layout.world_size  # a balanced split over every device
    touched = cost.sharded_parameters_touched_per_sample
    own_grads = own if touched is None else min(own, global_batch_size * touched / layout.world_size)
    sharded_bytes = own * (weight_b + optim_b) + own_grads * grad_b
    weights += own * weight_b
    gradients += own_grads * grad_b
    optimizer += own * optim_b

    per_layer = layer_activation_bytes(cost, plan)
    # the layer being recomputed is briefly whole
    full = layer_activation_bytes(cost, plan, "selective") if plan.recompute == "full" else 0.0
    in_flight = min(m, p) * ((1 + (p - 1) / (p * v)) if v > 1 else 1)
    logits = cost.output_bytes(plan.micro_batch, layout.tp)
    first = layers * in_flight * per_layer + full
    last = layers * per_layer + full
    if p == 1:
        return MemoryBreakdown("every device", weights, gradients, optimizer, last, logits, accelerator.memory_bytes,
                               sharded_bytes)
    if first >= last + logits:
        return MemoryBreakdown("first stage", weights, gradients, optimizer, first, 0.0, accelerator.memory_bytes,
                               sharded_bytes)
    return MemoryBreakdown("last stage", weights, gradients, optimizer, last, logits, accelerator.memory_bytes,
                           sharded_bytes)
