"""What is 3D U-Net-specific in parallelising it: nothing to cut. The 31M-parameter network trains
data parallel (DDP) in every published v3.1 entry; its evaluation runs different numbers of
forwards per rank (cases differ in size), which FSDP's per-forward all-gathers cannot do."""

from __future__ import annotations

import torch

from trainclock.distributed.parallelize import ModelParallelism

PARALLELISM = ModelParallelism(gpu_memory_format=torch.channels_last_3d)
