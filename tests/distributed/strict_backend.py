"""A process-group backend that refuses what NCCL would refuse, for CPU machines.

Under NCCL every tensor of a collective must be on the GPU; gloo on a CPU machine takes anything,
so a loss moved to the host before its all-reduce passes every CPU test and fails the first
multi-GPU step. This backend ("strict") serves two device types: the CPU, for the collectives
torch issues for a model (DDP's buckets, FSDP2, DTensor: on a GPU node they are on the model's
GPU), and torch's lazy device, which stands in for the GPU as the communication device (lazy
tensors hold real values, computed on the CPU). trainclock's code must put every tensor it hands
to a collective on the group's communication device (distributed.collectives.comm_device: here
lazy); a tensor on any other device, passed by trainclock's own code, is refused with the NCCL
error's words. The work itself is done by an inner gloo group on CPU copies.

Loaded in trainclock's worker processes by TRAINCLOCK_DIST_PLUGIN=tests.distributed.strict_backend
with TRAINCLOCK_DIST_BACKEND=strict."""

from __future__ import annotations

import sys
from datetime import timedelta

import torch
import torch._lazy.ts_backend
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

NAME = "strict"
COMM_DEVICE = "lazy"
_API_FILES = ("distributed_c10d.py", "c10d_logger.py")


def issued_by_caller() -> tuple[bool, str]:
    """Whether the collective now running was called through torch.distributed's API by code
    outside torch (trainclock's), and where from. Collectives torch issues itself (DDP's reducer
    from C++, FSDP2 and DTensor from torch's modules, the object collectives, which choose their
    device themselves) are not."""
    frame = sys._getframe(2)
    while frame is not None and not frame.f_code.co_filename.endswith(_API_FILES):
        frame = frame.f_back
    if frame is None:  # no API frame: torch's C++ (DDP's reducer) issued it
        return False, ""
    while frame.f_back is not None and frame.f_back.f_code.co_filename.endswith(_API_FILES):
        frame = frame.f_back
        if "_object" in frame.f_code.co_name:
            return False, ""
    caller = frame.f_back
    if caller is None or "/torch/" in caller.f_code.co_filename:
        return False, ""
    return True, f"{caller.f_code.co_filename}:{caller.f_lineno}"


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _on_cpu(value, copies: list[tuple[torch.Tensor, torch.Tensor]]):
    """`value` with every tensor off the CPU replaced by a CPU copy (remembered, to copy back)."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu":
            return value
        copy = value.cpu()
        copies.append((value, copy))
        return copy
    if isinstance(value, list):
        return [_on_cpu(v, copies) for v in value]
    if isinstance(value, tuple):
        return tuple(_on_cpu(v, copies) for v in value)
    return value


def _done(result) -> dist.Work:
    future = torch.futures.Future()
    future.set_result(result)
    return _create_work_from_future(future)


class StrictProcessGroup(dist.ProcessGroup):
    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self.inner = dist.ProcessGroupGloo(dist.PrefixStore("strict-inner", store), rank, size, timeout)

    def getBackendName(self) -> str:
        return NAME

    # a group implemented in Python has no C++ backend to keep its name: device meshes look groups up by it
    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        return self._name

    def _run(self, name: str, *args):
        direct, where = issued_by_caller()
        if direct:
            for tensor in _tensors(args):
                if tensor.device.type != COMM_DEVICE:
                    raise RuntimeError(f"No backend type associated with device type {tensor.device.type} "
                                       f"(strict backend: a {name} from {where} passed a tensor on {tensor.device}, "
                                       f"not on the group's communication device, as NCCL would refuse)")
        copies: list[tuple[torch.Tensor, torch.Tensor]] = []
        work = getattr(self.inner, name)(*_on_cpu(args, copies))
        if not copies:  # all on the CPU: gloo's own work, asynchronous as the caller may want (p2p)
            return work
        work.wait()
        for original, copy in copies:
            original.copy_(copy)
        return _done(_tensors(args))

    def _get_backend(self, device: torch.device):
        return self.inner  # asked by batch_isend_irecv whether it coalesces (gloo does not)

    # torch's collectives call these on the group (the *_single forms are torch 2.14's)
    def allreduce(self, *args):
        return self._run("allreduce", *args)

    def allreduce_coalesced(self, *args):
        return self._run("allreduce_coalesced", *args)

    def broadcast(self, *args):
        return self._run("broadcast", *args)

    def allgather(self, *args):
        return self._run("allgather", *args)

    def _allgather_base(self, *args):
        return self._run("_allgather_base", *args)

    def all_gather_single(self, *args):
        return self._run("all_gather_single", *args)

    def all_gather_single_coalesced(self, *args):
        return self._run("all_gather_single_coalesced", *args)

    def reduce_scatter(self, *args):
        return self._run("reduce_scatter", *args)

    def _reduce_scatter_base(self, *args):
        return self._run("_reduce_scatter_base", *args)

    def reduce_scatter_single(self, *args):
        return self._run("reduce_scatter_single", *args)

    def reduce_scatter_single_coalesced(self, *args):
        return self._run("reduce_scatter_single_coalesced", *args)

    def alltoall_base(self, *args):
        return self._run("alltoall_base", *args)

    def all_to_all_single(self, *args):
        return self._run("all_to_all_single", *args)

    def send(self, *args):
        return self._run("send", *args)

    def recv(self, *args):
        return self._run("recv", *args)

    def barrier(self, opts):
        self.inner.barrier().wait()
        return _done([])


def _create(options, _backend_options) -> StrictProcessGroup:
    return StrictProcessGroup(options.store, options.group_rank, options.group_size, options.timeout)


torch._lazy.ts_backend.init()
if NAME not in dist.Backend.backend_list:
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu", COMM_DEVICE])
