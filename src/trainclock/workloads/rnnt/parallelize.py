"""What is RNN-T-specific in parallelising it: nothing to cut. The 49M-parameter network trains
data parallel (DDP) in the reference and the published entries; its greedy evaluation runs a
different number of steps per rank, which FSDP's per-forward all-gathers cannot do."""

from __future__ import annotations

from trainclock.distributed.parallelize import ModelParallelism

PARALLELISM = ModelParallelism()
