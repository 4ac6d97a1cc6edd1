"""How a run lays the 26 tables over its processes (--embedding-sharding), and the optimizer that
takes sharded (DTensor) and plain parameters together."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.optim.adagrad import Adagrad

SHARDINGS = ("table", "row", "none")


def embedding_sharding(choice: str | None, layout: Layout, tables: int) -> str:
    """The layout of the tables: the user's choice, checked, or the default: whole tables per
    process (no table is split, the all-to-all carries only pooled rows) when there are at least as
    many tables as processes, else rows split over all of them; one process holds them all."""
    if layout.fsdp and choice in ("table", "row"):
        raise UsageError("--embedding-sharding shards the tables itself and keeps the dense part in DDP; drop --fsdp")
    if choice is None:
        if layout.dp == 1 or layout.fsdp:
            return "none"
        return "table" if tables >= layout.dp else "row"
    if choice != "none" and layout.dp == 1:
        raise UsageError(f"--embedding-sharding {choice} splits the tables over processes, but this run has one; "
                         "add --nproc 2 or more, or drop the flag")
    if choice == "table" and tables < layout.dp:
        raise UsageError(f"--embedding-sharding table over {layout.dp} processes leaves some without one of the "
                         f"{tables} tables; use --embedding-sharding row")
    return choice


class ShardedAdagrad(Adagrad):
    """The rules' Adagrad, with row-wise tables (DTensor) in a parameter group apart from the plain
    parameters: the foreach kernels take one kind of tensor per call."""

    def build(self, model: nn.Module) -> torch.optim.Adagrad:
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if isinstance(p, DTensor) == sharded]} for sharded in (False, True)]
        return torch.optim.Adagrad([g for g in groups if g["params"]], lr=self.learning_rate, lr_decay=self.lr_decay,
                                   weight_decay=self.weight_decay,
                                   initial_accumulator_value=self.initial_accumulator_value, eps=self.eps,
                                   foreach=True)
