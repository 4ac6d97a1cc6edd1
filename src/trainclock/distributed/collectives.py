"""The collectives trainclock issues itself, on the device their group communicates on.

NCCL takes CUDA tensors only: a CPU tensor (a loss moved to the host, a flag made with
torch.tensor) raises "No backend type associated with device type cpu" on the first multi-GPU
step, while gloo on a CPU machine takes anything. Every tensor trainclock hands to a collective
goes through here, is moved to its group's communication device (a no-op where it already is)
and comes back on the device it came from. Collectives issued by torch for a model (DDP's
buckets, FSDP2's all-gathers, DTensor) already use the model's device; object collectives
(all_gather_object, broadcast_object_list) pick their device themselves."""

from __future__ import annotations

import functools
import importlib
import os

import torch
import torch.distributed as dist

# A process-group backend other than the device's own (gloo on GPUs, or a backend a plugin
# registers: TRAINCLOCK_DIST_PLUGIN names the module to import first; the tests' strict backend).
BACKEND_VARIABLE = "TRAINCLOCK_DIST_BACKEND"
PLUGIN_VARIABLE = "TRAINCLOCK_DIST_PLUGIN"


def backend_for(device: torch.device) -> str:
    """NCCL for CUDA, gloo for CPU, unless the environment names another backend."""
    plugin = os.environ.get(PLUGIN_VARIABLE)
    if plugin:
        importlib.import_module(plugin)  # registers its backends (dist.Backend.register_backend)
    return os.environ.get(BACKEND_VARIABLE) or ("nccl" if device.type == "cuda" else "gloo")


def comm_device(group: dist.ProcessGroup | None = None) -> torch.device:
    """The device the group's tensors must be on: an accelerator the group serves and this
    process has (NCCL: the current CUDA device), else the CPU."""
    # the device types the group has a backend for: "cuda:nccl", "cpu:gloo,cuda:gloo"
    served = [part.split(":")[0] for part in dist.get_backend_config(group).split(",")]
    for device_type in served:
        if device_type != "cpu" and _usable(device_type):
            return torch.device("cuda", torch.cuda.current_device()) if device_type == "cuda" else torch.device(device_type)
    return torch.device("cpu")


@functools.cache
def _usable(device_type: str) -> bool:
    if device_type == "cuda":
        return torch.cuda.is_available()
    try:
        torch.empty(0, device=device_type)
        return True
    except Exception:  # noqa: BLE001 - the fake backend names "hpu", whose module torch may lack (ImportError)
        return False


def all_reduce(tensor: torch.Tensor, group: dist.ProcessGroup | None = None,
               op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
    """The reduction of `tensor` over the group, as a new tensor on `tensor`'s device."""
    value = tensor.to(comm_device(group), copy=True)
    dist.all_reduce(value, op=op, group=group)
    return value.to(tensor.device)


def all_reduce_(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> None:
    """Sum `tensor` over the group in place (gradients shared between ranks)."""
    device = comm_device(group)
    if tensor.device == device:
        dist.all_reduce(tensor, group=group)
    else:
        tensor.copy_(all_reduce(tensor, group))  # all_reduce returns it on tensor's device


def all_gather(tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> list[torch.Tensor]:
    """Every rank's `tensor` (all of one shape), in rank order, on `tensor`'s device."""
    value = tensor.to(comm_device(group))
    parts = [torch.empty_like(value) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, value, group=group)
    return [p.to(tensor.device) for p in parts]


def send(tensor: torch.Tensor, dst: int, group: dist.ProcessGroup | None = None) -> None:
    dist.send(tensor.to(comm_device(group)), dst=dst, group=group)


def recv(tensor: torch.Tensor, src: int, group: dist.ProcessGroup | None = None) -> None:
    """Receive into `tensor` (on any device)."""
    device = comm_device(group)
    if tensor.device == device:
        dist.recv(tensor, src=src, group=group)
        return
    buffer = torch.empty_like(tensor, device=device)
    dist.recv(buffer, src=src, group=group)
    tensor.copy_(buffer.to(tensor.device))


def all_to_all_single(output: torch.Tensor, tensor: torch.Tensor, output_splits: list[int], input_splits: list[int],
                      group: dist.ProcessGroup | None = None) -> None:
    """Scatter `tensor`'s splits to the ranks and gather theirs into `output` (no autograd)."""
    device = comm_device(group)
    received = output if output.device == device else torch.empty_like(output, device=device)
    dist.all_to_all_single(received, tensor.to(device), output_splits, input_splits, group=group)
    if received is not output:
        output.copy_(received.to(output.device))
