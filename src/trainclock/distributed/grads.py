"""Gradient norms and clipping for models that mix sharded (DTensor: tensor parallel, FSDP2) and
plain parameters. torch's clip_grad_norm_ takes one kind (and one mesh) per call, so each kind is
normed apart and the norms combined; a DTensor norm is made whole across its mesh."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.distributed.tensor import DTensor


def _by_kind(params: Iterable[torch.nn.Parameter]) -> list[list[torch.nn.Parameter]]:
    """Plain gradients, then DTensor gradients grouped by mesh: FSDP2 over tensor parallel puts the
    split matrices on the 2-D (dp, tp) mesh and the LayerNorms on the dp mesh, and DTensor ops
    take one mesh per call."""
    kinds: dict[object, list[torch.nn.Parameter]] = {}
    for p in params:
        if p.grad is not None:
            kinds.setdefault(p.grad.device_mesh if isinstance(p.grad, DTensor) else None, []).append(p)
    return list(kinds.values())


def grad_norm(params: Iterable[torch.nn.Parameter]) -> torch.Tensor:
    """The L2 norm of the gradients, as a plain tensor (0 when there are none)."""
    norms = []
    for kind in _by_kind(params):
        norm = torch.nn.utils.get_total_norm([p.grad for p in kind])
        norms.append(norm.full_tensor() if isinstance(norm, DTensor) else norm)
    if not norms:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack(norms)) if len(norms) > 1 else norms[0]


def clip_grads_with_norm(params: Iterable[torch.nn.Parameter], max_norm: float, total: torch.Tensor) -> None:
    """Scale the gradients so that their norm `total` becomes at most max_norm."""
    for kind in _by_kind(params):
        torch.nn.utils.clip_grads_with_norm_(kind, max_norm, total)
