"""A made-up accelerator with round numbers, so that hand-computed expectations stay readable, and
plans written the way the old flat layout read."""

from __future__ import annotations

from dataclasses import replace

from trainclock.distributed.layout import Layout
from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.parallel_plan import Plan

ROUND = Accelerator(
    id="round", name="Round Numbers", peak_flops={"bf16": 100e12, "fp8": 200e12, "fp32": 10e12},
    memory_bytes=100e9, memory_bandwidth=1e12, accelerators_per_node=8, intra_node_bandwidth=100e9,
    inter_node_bandwidth=10e9, intra_node_latency=0.0, inter_node_latency=0.0,
)


def accelerator(**changes) -> Accelerator:
    return replace(ROUND, **changes)


def plan(tp: int = 1, pp: int = 1, dp: int = 1, vp: int = 1, **fields) -> Plan:
    """A plan of this layout with the other fields given (micro_batch, recompute, zero...)."""
    return Plan(layout=Layout(dp=dp, tp=tp, pp=pp, vp=vp), **fields)
