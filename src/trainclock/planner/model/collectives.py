"""Communication times: the alpha-beta model (latency per hop + bytes over bandwidth) of the
collectives a training step uses, and how much of a bucketed collective hides behind compute.

Sizes are the full buffer each rank holds (an all-reduce of S bytes moves 2(n-1)/n * S per rank)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.parallel_plan import spans_nodes

# nccl-tests bus bandwidth reaches about 80% of the line rate on NVLink/NVSwitch and on
# InfiniBand NDR; the same fraction is assumed for other fabrics.
LINK_EFFICIENCY = 0.8


@dataclass(frozen=True)
class Link:
    bandwidth: float  # achievable bytes/s per direction per rank
    latency: float  # seconds per hop


def group_link(accelerator: Accelerator, group: tuple[int, int]) -> Link:
    """The link a communication group uses: the node's fabric if the group fits in one node,
    otherwise the scale-out network, which then limits every ring step."""
    if spans_nodes(group, accelerator.accelerators_per_node):
        bandwidth, latency = accelerator.inter_node_bandwidth, accelerator.inter_node_latency
    else:
        bandwidth, latency = accelerator.intra_node_bandwidth, accelerator.intra_node_latency
    return Link(bandwidth * LINK_EFFICIENCY, latency)


def ring_all_reduce_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """Reduce-scatter then all-gather around a ring: 2(n-1) steps of S/n bytes each."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes / link.bandwidth + 2 * (ranks - 1) * link.latency


def tree_all_reduce_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """Pipelined double binary tree (NCCL's tree): reduce up and broadcast down, each moving the
    whole buffer once per rank, with log2(n) hops of latency each way."""
    if ranks <= 1:
        return 0.0
    return 2 * size_bytes / link.bandwidth + 2 * math.ceil(math.log2(ranks)) * link.latency


def all_reduce_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """The faster of ring and tree, as NCCL chooses: ring for large buffers, tree when the
    ring's 2(n-1) latencies dominate (small buffers on many ranks)."""
    return min(ring_all_reduce_seconds(size_bytes, ranks, link), tree_all_reduce_seconds(size_bytes, ranks, link))


def reduce_scatter_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """Half a ring all-reduce; an all-gather of the same buffer costs the same."""
    return ring_all_reduce_seconds(size_bytes, ranks, link) / 2


def all_to_all_seconds(size_bytes: float, ranks: int, link: Link) -> float:
    """Every rank sends (n-1)/n of its buffer, a part to each other rank, all at once (NCCL's
    grouped point-to-point sends): one latency, the bytes over the rank's bandwidth."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * size_bytes / link.bandwidth + link.latency


def group_all_to_all_seconds(size_bytes: float, accelerator: Accelerator, group: tuple[int, int],
                             network_efficiency: float | None = None) -> float:
    """An all-to-all over a communication group ((stride, size) as Layout.group gives it): the
    parts for ranks on the rank's own node cross the node's fabric while those for other nodes
    leave by the network, at the same time; the slower of the two. Only the off-node parts pay
    the network (a 2-node group sends half its buffer there, not (n-1)/n of it).
    `network_efficiency`: the fraction of the network's line rate the off-node parts reach, where
    calibration measured it (Efficiency.exchange_network); else LINK_EFFICIENCY, the all-reduce's.
    Many small messages to every other node's ranks reach less of it than a ring's large ones."""
    stride, ranks = group
    if not spans_nodes(group, accelerator.accelerators_per_node):
        return all_to_all_seconds(size_bytes, ranks, group_link(accelerator, group))
    on_node_ranks = max(1, accelerator.accelerators_per_node // stride)  # this group's ranks on one node
    rate = LINK_EFFICIENCY if network_efficiency is None else network_efficiency
    network = Link(accelerator.inter_node_bandwidth * rate, accelerator.inter_node_latency)
    fabric = Link(accelerator.intra_node_bandwidth * LINK_EFFICIENCY, accelerator.intra_node_latency)
    off_node = (ranks - on_node_ranks) / ranks * size_bytes / network.bandwidth + network.latency
    on_node = ((on_node_ranks - 1) / ranks * size_bytes / fabric.bandwidth + fabric.latency
               if on_node_ranks > 1 and fabric.bandwidth > 0 else 0.0)
    return max(off_node, on_node)


def _node_split(accelerator: Accelerator, group: tuple[int, int]) -> tuple[int, int]:
    """(ranks of the group on one node, nodes the group spans) for a group that spans nodes."""
    stride, ranks = group
    on_node = max(1, min(ranks, accelerator.accelerators_per_node // stride))
    return on_node, ranks // on_node


def group_all_reduce_seconds(size_bytes: float, accelerator: Accelerator, group: tuple[int, int]) -> float:
    """An all-reduce over a communication group ((stride, size) as Layout.group gives it). Inside a
    node: the alpha-beta all-reduce over its fabric. Across nodes, the faster of the flat ring at
    the network's rate and the hierarchical all-reduce NCCL's tree and CollNet algorithms run on
    servers with a network port per accelerator: reduce-scatter over the node's fabric among the
    group's k ranks on a node, an all-reduce of each rank's 1/k share across the nodes, every rank
    through its own port at once, then an all-gather over the fabric; each phase pays its own
    latencies, so many small buckets stay latency-bound. (Reduce-scatter and all-gather, which
    NCCL runs as rings only, keep the flat ring: reduce_scatter_seconds over group_link.)"""
    stride, ranks = group
    flat = all_reduce_seconds(size_bytes, ranks, group_link(accelerator, group))
    if not spans_nodes(group, accelerator.accelerators_per_node):
        return flat
    on_node = max(1, min(ranks, accelerator.accelerators_per_node // stride))
    nodes = ranks // on_node
    inside = 2 * reduce_scatter_seconds(size_bytes, on_node, _fabric(accelerator)) if on_node > 1 else 0.0
    return min(flat, inside + all_reduce_seconds(size_bytes / on_node, nodes, _network(accelerator)))


def _fabric(accelerator: Accelerator) -> Link:
    return Link(accelerator.intra_node_bandwidth * LINK_EFFICIENCY, accelerator.intra_node_latency)


def _network(accelerator: Accelerator) -> Link:
    return Link(accelerator.inter_node_bandwidth * LINK_EFFICIENCY, accelerator.inter_node_latency)


def send_seconds(size_bytes: float, link: Link) -> float:
    return size_bytes / link.bandwidth + link.latency if size_bytes else 0.0


def exposed_after_ready(ready_times: Sequence[float], bucket_seconds: float, compute_end: float) -> float:
    """Communication left after compute ends when buckets are sent one after another, each as
    soon as it is ready (gradients during the backward pass): first-in first-out."""
    finish = -math.inf
    for ready in ready_times:
        finish = max(finish, ready) + bucket_seconds
    return max(0.0, finish - compute_end)


def delay_before_deadlines(deadlines: Sequence[float], bucket_seconds: float) -> float:
    """How long compute must wait when buckets are fetched one after another from time 0 and
    bucket i is needed at deadlines[i] (weights gathered before the forward pass uses them)."""
    return max((0.0, *((i + 1) * bucket_seconds - deadline for i, deadline in enumerate(deadlines))))
