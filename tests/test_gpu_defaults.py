"""What a run sets for a GPU and leaves alone on a CPU: convolutional models' weights in the
channels-last layout cuDNN's fastest kernels use, only where the model is on a GPU."""

from __future__ import annotations

import torch
from torch import nn

from trainclock.distributed.parallelize import ModelParallelism, to_gpu_memory_format
from trainclock.workload import registry


def test_a_cpu_model_keeps_its_layout():
    model = nn.Conv2d(3, 8, 3)
    to_gpu_memory_format(model, ModelParallelism(gpu_memory_format=torch.channels_last))
    assert model.weight.is_contiguous()


def test_on_a_gpu_the_weights_take_the_declared_layout(monkeypatch):
    """torch.Tensor.device cannot be faked on a CPU machine: the check is on the rule the helper
    follows, with the device test patched to say 'cuda'."""
    model = nn.Sequential(nn.Conv3d(1, 4, 3), nn.Linear(4, 4))
    moved = []
    monkeypatch.setattr(nn.Module, "to", lambda self, *a, **k: moved.append(k.get("memory_format")) or self)
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda", 0)), raising=False)
    to_gpu_memory_format(model, ModelParallelism(gpu_memory_format=torch.channels_last_3d))
    monkeypatch.undo()
    assert moved == [torch.channels_last_3d]


def test_the_convolutional_benchmarks_declare_a_gpu_layout():
    """Every workload whose full-size model is convolutional names its layout (resnet sets its own,
    CPU included, from its spec); the others leave theirs."""
    declared = {w.key for w in registry.workloads()
                if (p := getattr(__import__(type(w).__module__, fromlist=["PARALLELISM"]), "PARALLELISM", None))
                is not None and p.gpu_memory_format is not None}
    assert {"ssd", "maskrcnn", "unet3d"} <= declared
