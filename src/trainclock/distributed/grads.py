"""Gradient norms and clipping for models that mix sharded (DTensor: tensor parallel, FSDP2) and
plain parameters. torch's clip_grad_norm_ takes one kind (and one mesh) per call, so each kind is
normed apart and the norms combined; a DTensor norm is made whole across its mesh. A plain
parameter that one rank of a group holds alone (a table-wise embedding table) carries its group
under the attribute SHARD_GROUP: its squared norm is summed over that group."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from trainclock.distributed.collectives import all_reduce
from trainclock.distributed.local_shards import SHARD_GROUP, is_dtensor


def _kind(p: torch.nn.Parameter) -> object:
    if is_dtensor(p.grad):
        return p.grad.device_mesh
    group = getattr(p, SHARD_GROUP, None)
    return ("group", group) if group is not None else None


def _by_kind(params: Iterable[torch.nn.Parameter]) -> list[list[torch.nn.Parameter]]:
    """Plain gradients, then DTensor gradients grouped by mesh: FSDP2 over tensor parallel puts the
    split matrices on the 2-D (dp, tp) mesh and the LayerNorms on the dp mesh, and DTensor ops
    take one mesh per call."""
    kinds: dict[object, list[torch.nn.Parameter]] = {}
    for p in params:
        if p.grad is not None:
            kinds.setdefault(_kind(p), []).append(p)
    return list(kinds.values())


def grad_norm(params: Iterable[torch.nn.Parameter]) -> torch.Tensor:
    """The L2 norm of the gradients, as a plain tensor (0 when there are none)."""
    norms = []
    for kind in _by_kind(params):
        norm = torch.nn.utils.get_total_norm([p.grad for p in kind])
        group = getattr(kind[0], SHARD_GROUP, None) if not is_dtensor(kind[0].grad) else None
        if group is not None:  # every rank of the group holds such parameters (it is built so)
            norm = all_reduce(norm.double().pow(2), group=group).sqrt().to(norm.dtype)
        norms.append(norm.full_tensor() if is_dtensor(norm) else norm)
    if not norms:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack(norms)) if len(norms) > 1 else norms[0]


def clip_grads_with_norm(params: Iterable[torch.nn.Parameter], max_norm: float, total: torch.Tensor) -> None:
    """Scale the gradients so that their norm `total` becomes at most max_norm."""
    for kind in _by_kind(params):
        torch.nn.utils.clip_grads_with_norm_(kind, max_norm, total)
