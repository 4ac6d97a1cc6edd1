"""A made-up accelerator with round numbers, so that hand-computed expectations stay readable."""

from __future__ import annotations

from dataclasses import replace

from trainclock.planner.hardware import Accelerator

ROUND = Accelerator(
    id="round", name="Round Numbers", peak_flops={"bf16": 100e12, "fp8": 200e12, "fp32": 10e12},
    memory_bytes=100e9, memory_bandwidth=1e12, accelerators_per_node=8, intra_node_bandwidth=100e9,
    inter_node_bandwidth=10e9, intra_node_latency=0.0, inter_node_latency=0.0,
)


def accelerator(**changes) -> Accelerator:
    return replace(ROUND, **changes)
