"""What is ResNet-specific in parallelising it: nothing but data parallelism (every published v3.1
entry trains it so); no tensor-parallel plan, pipeline cut or FSDP units (25.6M parameters fit)."""

from __future__ import annotations

from trainclock.distributed.parallelize import ModelParallelism

PARALLELISM = ModelParallelism()
