"""What is 3D U-Net-specific in parallelising it: nothing to cut. The 31M-parameter network trains
data parallel (DDP) in every published v3.1 entry; its evaluation runs different numbers of
forwards per rank (cases differ in size), which FSDP's per-forward all-gathers cannot do."""

from __future__ import annotations

import torch

from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism
from trainclock.errors import UsageError


def check_layout(layout: Layout) -> None:
    if layout.tp > 1 or layout.pp > 1:
        raise UsageError("3D U-Net has no tensor-parallel plan or pipeline cut; run it data parallel (drop --tp/--pp)")
    if layout.fsdp and layout.dp > 1:
        raise UsageError("3D U-Net trains data parallel with DDP (its evaluation cannot meet FSDP's all-gathers); "
                         "drop --fsdp")


PARALLELISM = ModelParallelism(gpu_memory_format=torch.channels_last_3d)
