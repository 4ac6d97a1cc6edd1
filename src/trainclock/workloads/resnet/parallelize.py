"""What is ResNet-specific in parallelising it: nothing but data parallelism (every published v3.1
entry trains it so); no tensor-parallel plan, pipeline cut or FSDP units (25.6M parameters fit)."""

from __future__ import annotations

from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism
from trainclock.errors import UsageError


def check_layout(layout: Layout) -> None:
    if layout.tp > 1 or layout.pp > 1:
        raise UsageError("ResNet has no tensor-parallel plan or pipeline cut; run it data parallel (drop --tp/--pp)")


PARALLELISM = ModelParallelism()
