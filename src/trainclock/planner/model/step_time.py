"""Time of one optimizer step, and of one evaluation, of a workload under a plan.

Per micro-batch: the workload's training FLOPs at a calibrated fraction of the accelerator's peak
(matmuls with weights at the plan's precision, the others, such as attention, at bf16), plus
tensor-parallel collectives (Megatron: 2 in the forward and 2 in the backward of every layer).
Per step: the 1F1B pipeline, m micro-batches plus a bubble of (p-1)/v micro-batches (Narayanan
et al. 2021: bubble fraction (p-1)/(v*m + p-1)), pipeline sends, the data-parallel gradient
reduce-scatter and weight all-gather (or all-reduce: across nodes, hierarchical where that is
faster, collectives.group_all_reduce_seconds) with the part that overlap cannot hide (gradients
leave in buckets as the backward finishes them: per layer, or by size, gradient_buckets), and the
memory-bound optimizer update (its bytes per parameter from the workload's optimizer state).
Parameters the model shards itself (embedding tables) add the all-to-all exchange of
cost.exchange_values_per_sample per sample, forward and backward, on the critical path (the
next layer waits for it); they stay out of the data-parallel traffic, and their update is sparse
when the cost model says which of them a sample touches. Frozen parameters (all but
cost.trained_parameter_count) have no gradients to reduce and no update."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

from trainclock.distributed.layout import Layout
from trainclock.planner.model import collectives as comm
from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.memory import trained_share
from trainclock.planner.model.parallel_plan import Plan, spans_nodes
from trainclock.workload.cost_model import WorkloadCost


# PyTorch DDP's default gradient bucket (bucket_cap_mb = 25)
BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class Efficiency:
    """What calibration fits for a software stack."""

    compute: float  # fraction of peak FLOP/s the matmuls reach
    eval_overhead_s: float = 0.0  # fixed cost of one evaluation: loader, mode switch, loss reduction
    run_overhead_s: float = 0.0  # once per run inside the timed region: start-up, warm-up, last checkpoint
    # (a fit on own runs may make it negative: their first interval's steps cheaper than the steady ones)
    # fraction of peak the evaluation's forward matmuls reach where it differs from `compute`:
    # forward-only work, free of autograd and the backward's slower kernels, can run nearer the
    # peak (a CPU tier's evaluations measured at 60% of the forward time its training implies)
    eval_compute: float | None = None
    # once per optimizer step whatever its size: kernel launches, host synchronisation, the step's
    # bookkeeping; what makes a few samples per accelerator slower per sample than many
    step_overhead_s: float = 0.0
    # an evaluation's work that runs beside training instead of stopping it (asynchronous
    # evaluation: the replicas' forward passes stop training, then the scoring, such as COCO's on
    # the host, goes on while the next interval trains): a fixed cost per evaluation, measured in a
    # log as eval_stop after training has resumed. Hidden behind training except on the last
    # evaluation, whose result stops the run (see predict.Prediction)
    eval_async_s: float = 0.0
    # fraction of the network's line rate the sharded parameters' all-to-all reaches across nodes
    # (None: collectives.LINK_EFFICIENCY, the all-reduce's); fitted where entries exchange over
    # the network (calibration.published_scores.fit_group)
    exchange_network: float | None = None


@dataclass(frozen=True)
class MicroBatch:
    """Seconds one device spends on one micro-batch, and one pipeline send."""

    forward: float  # matmuls of the forward pass
    backward: float  # matmuls of the backward pass, recomputation included
    recompute: float  # the recomputed part of `backward`
    tp_forward: float  # tensor-parallel collectives
    tp_backward: float
    send: float  # one activation chunk to the next pipeline stage
    exchange: float = 0.0  # one all-to-all of the sharded parameters' values (each of forward, backward)

    @property
    def compute(self) -> float:
        return self.forward + self.backward

    @property
    def tp(self) -> float:
        return self.tp_forward + self.tp_backward


@dataclass(frozen=True)
class StepBreakdown:
    micro_batches: int
    compute_s: float  # all micro-batches' matmuls
    recompute_s: float  # part of compute_s
    tp_comm_s: float
    pp_comm_s: float  # pipeline sends that do not overlap compute
    bubble_s: float  # pipeline fill and drain
    dp_comm_s: float  # data-parallel traffic, hidden or not
    dp_exposed_s: float  # the part of it the step waits for
    optimizer_s: float
    exchange_s: float = 0.0  # all-to-all of sharded embeddings, forward and backward
    fixed_s: float = 0.0  # the calibrated cost of a step whatever its size (Efficiency.step_overhead_s)
    straggler_s: float = 0.0  # the wait for the slowest data-parallel replica (straggler_seconds)

    @property
    def step_s(self) -> float:
        return (self.compute_s + self.tp_comm_s + self.pp_comm_s + self.bubble_s + self.dp_exposed_s + self.optimizer_s
                + self.exchange_s + self.fixed_s + self.straggler_s)

    def rows(self) -> list[tuple[str, float]]:
        """(what, seconds) in the order a table shows them; they add up to step_s."""
        return [("matmul compute" + (f" (recompute {self.recompute_s:.3g} s)" if self.recompute_s else ""), self.compute_s),
                ("tensor-parallel collectives", self.tp_comm_s),
                ("pipeline sends (exposed)", self.pp_comm_s),
                ("pipeline bubble", self.bubble_s),
                (f"data-parallel sync (exposed of {self.dp_comm_s:.3g} s)", self.dp_exposed_s),
                ("optimizer update", self.optimizer_s),
                *([("embedding all-to-all (forward and backward)", self.exchange_s)] if self.exchange_s else []),
                *([("fixed per step (calibrated: launches, host sync)", self.fixed_s)] if self.fixed_s else []),
                *([("waiting for the slowest replica", self.straggler_s)] if self.straggler_s else [])]


def value_bytes(precision: str) -> int:
    """Bytes per value of the activations and gradients that travel between devices: bf16 in
    mixed precision (fp8 matmuls included), fp32 in fp32 training."""
    return 4 if precision == "fp32" else 2


def optimizer_update_bytes(plan: Plan, cost: WorkloadCost) -> float:
    """Bytes the optimizer update reads and writes per parameter it owns: the fp32 gradient (4),
    the fp32 master weight (read + write 8), its own state (read + write), and in mixed precision
    the 16-bit copy written back (2). Adam: 30 mixed, 28 fp32."""
    copy = 0 if plan.precision == "fp32" else 2
    return 4 + 8 + 2 * cost.optimizer_state_bytes_per_parameter + copy


def micro_batch_times(cost: WorkloadCost, plan: Plan, accelerator: Accelerator, efficiency: Efficiency) -> MicroBatch:
    layout = plan.layout
    shards = layout.tp * layout.pp
    other_precision = "fp32" if plan.precision == "fp32" else "bf16"
    other_peak = accelerator.peak_flops.get(other_precision) or accelerator.peak(plan.precision)
    flops = cost.flops_per_sample
    # training FLOPs are 1/3 forward, 2/3 backward
    forward = plan.micro_batch / shards * (flops.weights / accelerator.peak(plan.precision)
                                           + flops.other / other_peak) / 3 / efficiency.compute
    other_forward = plan.micro_batch / shards * flops.other / other_peak / 3 / efficiency.compute
    recompute = {"none": 0.0, "selective": other_forward, "full": forward}[plan.recompute]

    layers = cost.layers / layout.pp
    collectives = cost.tp_collectives_per_layer
    activation = plan.micro_batch * cost.boundary_values_per_sample * value_bytes(plan.precision)
    tp_collective = comm.all_reduce_seconds(activation, layout.tp, comm.group_link(accelerator, layout.group("tp")))
    tp_recompute = collectives * layers * tp_collective if plan.recompute == "full" else 0.0
    chunk = activation / (layout.tp if plan.sequence_parallel else 1)
    send = comm.send_seconds(chunk, comm.group_link(accelerator, layout.group("pp"))) if layout.pp > 1 else 0.0
    exchange = 0.0
    if cost.sharded_parameters and cost.exchange_values_per_sample:
        # the tables are split over the data-parallel ranks (the models that shard them have no tp or pp)
        values = plan.micro_batch * cost.exchange_values_per_sample * value_bytes(plan.precision)
        exchange = comm.group_all_to_all_seconds(values, accelerator, layout.group("dp"), efficiency.exchange_network)
    return MicroBatch(forward=forward, backward=2 * forward + recompute, recompute=recompute,
                      tp_forward=collectives * layers * tp_collective,
                      tp_backward=collectives * layers * tp_collective + tp_recompute, send=send, exchange=exchange)


def exchange_crosses_nodes(cost: WorkloadCost, plan: Plan, accelerator: Accelerator) -> bool:
    """Whether the plan's all-to-all of sharded parameters leaves the node (what
    Efficiency.exchange_network changes)."""
    return bool(cost.sharded_parameters and cost.exchange_values_per_sample
                and spans_nodes(plan.layout.group("dp"), accelerator.accelerators_per_node))


def step_time(cost: WorkloadCost, global_batch_size: int, plan: Plan, accelerator: Accelerator,
              efficiency: Efficiency) -> StepBreakdown:
    mb = micro_batch_times(cost, plan, accelerator, efficiency)
    m, p, v = plan.micro_batches(global_batch_size), plan.layout.pp, plan.layout.vp
    sends_per_micro_batch = 2 * v * mb.send  # each model chunk sends forward and backward
    per_micro_batch = mb.compute + mb.tp + 2 * mb.exchange + (0.0 if plan.overlap else sends_per_micro_batch)
    if plan.overlap:
        # Sends hide behind other micro-batches' work, except on the critical path of the fill and
        # drain: the first micro-batch's forward and the last one's backward cross every one of
        # the p*v chunks in turn.
        pp_comm = 2 * (p * v - 1) * mb.send if p > 1 else 0.0
    else:
        pp_comm = (m + (p - 1) / v) * sends_per_micro_batch
    dp_total, dp_exposed = _data_parallel(cost, plan, accelerator, mb, m)
    compute = m * mb.compute
    return StepBreakdown(
        micro_batches=m,
        compute_s=compute,
        recompute_s=m * mb.recompute,
        tp_comm_s=m * mb.tp,
        pp_comm_s=pp_comm,
        bubble_s=(p - 1) / v * per_micro_batch,
        dp_comm_s=dp_total,
        dp_exposed_s=dp_exposed,
        optimizer_s=optimizer_seconds(cost, plan, accelerator, global_batch_size),
        exchange_s=m * 2 * mb.exchange,
        fixed_s=efficiency.step_overhead_s,
        straggler_s=straggler_seconds(compute, cost.sample_work_cv, global_batch_size // plan.layout.dp,
                                      plan.layout.dp),
    )


def expected_max_normal(n: int) -> float:
    """The expected largest of n independent standard normal values (Blom's approximation,
    Phi^-1((n - 0.375) / (n + 0.25)): 1.43 for 8, 2.34 for 64, 3.23 for 1,024, against the exact
    1.42, 2.41, 3.24, where the sqrt(2 ln n) bound says 2.04, 2.88, 3.72). 0 for one."""
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25)) if n > 1 else 0.0


def straggler_seconds(compute_s: float, cv: float, samples_per_replica: int, replicas: int) -> float:
    """What a step waits beyond its mean compute for the slowest of `replicas` data-parallel
    replicas: each replica's compute over its `samples_per_replica` samples varies with a
    coefficient of cv / sqrt(samples) (independent samples average out), and the gradient reduction
    waits for the largest: mean + sigma x E[max of n normals]. Grows with the replicas, shrinks as
    each holds more samples."""
    if cv <= 0 or replicas <= 1 or samples_per_replica <= 0:
        return 0.0
    return compute_s * cv / math.sqrt(samples_per_replica) * expected_max_normal(replicas)


def eval_seconds(cost: WorkloadCost, plan: Plan, accelerator: Accelerator, efficiency: Efficiency) -> float:
    """One evaluation: a forward-only pipeline over the validation set, plus its fixed cost."""
    forward_only = efficiency if efficiency.eval_compute is None else replace(efficiency, compute=efficiency.eval_compute)
    mb = micro_batch_times(cost, plan, accelerator, forward_only)
    layout = plan.layout
    m = math.ceil(cost.eval_samples / (layout.dp * plan.micro_batch))
    per_micro_batch = mb.forward + mb.tp_forward + mb.exchange + (0.0 if plan.overlap else layout.vp * mb.send)
    return (m + (layout.pp - 1) / layout.vp) * per_micro_batch + efficiency.eval_overhead_s


def optimizer_seconds(cost: WorkloadCost, plan: Plan, accelerator: Accelerator,
                      global_batch_size: int | None = None) -> float:
    """The update is memory-bound: the bytes it touches over the memory bandwidth. Sharded
    parameters are split over every device; with a sparse update (and the batch known) only the
    rows the step's samples touch, at most all of them, are read and written."""
    layout = plan.layout
    sharded = cost.sharded_parameters
    trained = (cost.parameter_count - sharded) * trained_share(cost)  # frozen parameters are not updated
    owned = trained / (layout.tp * layout.pp) / (layout.dp if plan.zero >= 1 else 1)
    own_sharded = sharded / layout.world_size
    touched = cost.sharded_parameters_touched_per_sample
    if touched is not None and global_batch_size is not None:
        own_sharded = min(own_sharded, global_batch_size * touched / layout.world_size)
    return (owned + own_sharded) * optimizer_update_bytes(plan, cost) / accelerator.memory_bandwidth


def _data_parallel(cost: WorkloadCost, plan: Plan, accelerator: Accelerator, mb: MicroBatch, m: int) -> tuple[float, float]:
    """(total, exposed) seconds of data-parallel traffic per step. Gradients leave in per-layer
    buckets as the last backward passes finish them (the interleaved schedule finishes chunk v
    first, chunk 1 last), and weights come back in forward order before their first use."""
    layout = plan.layout
    if layout.dp == 1:
        return 0.0, 0.0
    group = layout.group("dp")
    link = comm.group_link(accelerator, group)
    # sharded parameters (embedding tables) are no replicas: their gradients stay where they live
    shard_bytes = (cost.parameter_count - cost.sharded_parameters) / (layout.tp * layout.pp) * value_bytes(plan.precision)
    buckets = gradient_buckets(cost, layout, shard_bytes)
    weight_bucket = shard_bytes / buckets
    # only trained parameters have gradients to reduce and updated weights to gather back
    bucket = weight_bucket * trained_share(cost)
    if plan.zero == 3:
        # FSDP: weights (frozen ones too) gathered for the forward and again for the backward,
        # gradients reduce-scattered, every micro-batch; hidden behind that micro-batch's compute
        # (an all-gather costs what a reduce-scatter of the same buffer costs)
        per_micro_batch = buckets * (2 * comm.reduce_scatter_seconds(weight_bucket, layout.dp, link)
                                     + comm.reduce_scatter_seconds(bucket, layout.dp, link))
        hidden = mb.compute if plan.overlap else 0.0
        return m * per_micro_batch, m * max(0.0, per_micro_batch - hidden)
    if plan.zero == 0:
        reduce_bucket, gather_bucket = comm.group_all_reduce_seconds(bucket, accelerator, group), 0.0
    else:
        reduce_bucket = gather_bucket = comm.reduce_scatter_seconds(bucket, layout.dp, link)
    total = buckets * (reduce_bucket + gather_bucket)
    if not plan.overlap:
        return total, total
    layers_per_chunk = buckets // layout.vp
    ready, end = _gradient_ready_times(layout, m, mb.backward + mb.tp_backward, layers_per_chunk)
    deadlines = _weight_deadlines(layout, m, mb.forward + mb.tp_forward, layers_per_chunk)
    exposed = comm.exposed_after_ready(ready, reduce_bucket, end)
    if gather_bucket:
        exposed += (comm.delay_before_deadlines(deadlines, gather_bucket) if plan.gather_overlap
                    else buckets * gather_bucket)
    return total, exposed


def gradient_buckets(cost: WorkloadCost, layout: Layout, shard_bytes: float) -> int:
    """How many buckets a replica's gradients leave in, as the backward pass finishes them: one per
    layer of a pipeline stage where the cost model declares its layers (Megatron's), else (a
    model declared as one block) by size, as DDP buckets them (BUCKET_BYTES each), finished evenly
    through the backward."""
    if cost.layers > 1:
        return cost.layers // layout.pp
    return max(1, math.ceil(shard_bytes / BUCKET_BYTES))


def _gradient_ready_times(layout: Layout, m: int, backward: float, layers: int) -> tuple[list[float], float]:
    """When each layer's gradient is final on the first stage (the last to finish), from the start
    of the last group of backward passes, and when that group ends. Chunks run v..1; each takes
    its last min(m, p) micro-batches, and the final one finishes the chunk's layers one by one."""
    v, group = layout.vp, min(m, layout.pp)
    per_chunk_pass = backward / v
    ready, t = [], 0.0
    for _chunk in range(v):
        t += (group - 1) * per_chunk_pass
        for _layer in range(layers):
            t += per_chunk_pass / layers
            ready.append(t)
    return ready, t


def _weight_deadlines(layout: Layout, m: int, forward: float, layers: int) -> list[float]:
    """When each layer's weights are first needed in the next step's forward passes: chunk 1 on
    its first min(m, p) micro-batches, then chunk 2, and so on."""
    v, group = layout.vp, min(m, layout.pp)
    per_chunk_pass = forward / v
    deadlines, t = [], 0.0
    for _chunk in range(v):
        deadlines.extend(t + i * per_chunk_pass / layers for i in range(layers))
        t += group * per_chunk_pass
    return deadlines

