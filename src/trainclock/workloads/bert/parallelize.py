"""What is BERT-specific in parallelising it: its encoder layers are the FSDP2 and
activation-checkpointing units. No tensor-parallel plan or pipeline cut: BERT-Large trains data
parallel in every published v3.1 entry."""

from __future__ import annotations

from trainclock.distributed.parallelize import ModelParallelism

PARALLELISM = ModelParallelism(blocks=lambda model: list(model.bert.encoder.layer))
