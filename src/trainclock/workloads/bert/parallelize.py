"""What is BERT-specific in parallelising it: its encoder layers are the FSDP2 and
activation-checkpointing units. No tensor-parallel plan or pipeline cut: BERT-Large trains data
parallel in every published v3.1 entry."""

from __future__ import annotations

from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism
from trainclock.errors import UsageError


def check_layout(layout: Layout) -> None:
    if layout.tp > 1 or layout.pp > 1:
        raise UsageError("BERT has no tensor-parallel plan or pipeline cut; run it data parallel (drop --tp/--pp)")


PARALLELISM = ModelParallelism(blocks=lambda model: list(model.bert.encoder.layer))
