"""DLRM with DCNv2 cross layers in plain PyTorch, as torchrec's DLRM_DCN that the reference trains:
dense features through the bottom MLP (ReLU after every layer), each multi-hot bag summed by its
table (nn.EmbeddingBag, mode "sum"; distributed/embeddings.py), the 27 vectors concatenated and crossed by low-rank DCNv2
layers x_{l+1} = x_0 * (W (V x_l) + b) + x_l, then the top MLP (ReLU between layers, none after the
last) to one click logit. Initialisation follows torchrec: tables uniform in +-sqrt(1/rows)."""

from __future__ import annotations

import math

import torch
from torch import nn

from trainclock.distributed.embeddings import EmbeddingBagCollection
from trainclock.workloads.dlrm_dcnv2.spec import DENSE_FEATURES, DlrmShape


def mlp(widths: tuple[int, ...], first: int, last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip((first, *widths[:-1]), widths)):
        layers.append(nn.Linear(a, b))
        if last_activation or i < len(widths) - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class LowRankCross(nn.Module):
    """torchrec's LowRankCrossNet: per layer V (d -> r, no bias) and W (r -> d, with bias)."""

    def __init__(self, width: int, layers: int, rank: int) -> None:
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(width, rank, bias=False) for _ in range(layers))
        self.W = nn.ModuleList(nn.Linear(rank, width) for _ in range(layers))

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, w in zip(self.V, self.W):
            x = x0 * w(v(x)) + x
        return x


def init_table(weight: torch.Tensor, rows: int) -> None:
    """torchrec's start: uniform in +-sqrt(1/rows) of the whole table (of which `weight` may be a part)."""
    bound = math.sqrt(1.0 / rows)
    nn.init.uniform_(weight, -bound, bound)


class DlrmDcnV2(nn.Module):
    def __init__(self, shape: DlrmShape, table_device: torch.device | str | None = None, sparse: bool = True) -> None:
        """table_device "meta": the tables get a shape and no storage, for sharding to fill
        only each rank's part (init_table); the dense part is built as usual. sparse: the tables'
        gradients hold only the rows a step looked up (False where DDP all-reduces the tables)."""
        super().__init__()
        self.bottom = mlp(shape.bottom, DENSE_FEATURES, last_activation=True)
        # the 26 tables as one collection, which a sharded run replaces by its sharded form
        # (distributed/embeddings.py): parameter names stay tables.<i>.weight either way
        self.tables = EmbeddingBagCollection(shape.rows, shape.dim, shape.multi_hot, device=table_device,
                                             sparse=sparse)
        self.cross = LowRankCross(shape.interaction_width, shape.cross_layers, shape.cross_rank)
        self.top = mlp(shape.top, shape.interaction_width, last_activation=False)
        for table, rows in zip(self.tables.tables(), shape.rows):
            if not table.weight.is_meta:
                init_table(table.weight, rows)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """Click logits of a batch: dense (B, 13) float, sparse (B, sum of bag sizes) int64, each
        table's fixed-size bags side by side (a 2D input to EmbeddingBag is one bag per row)."""
        x = torch.cat([self.bottom(dense), self.tables(sparse)], dim=1)
        return self.top(self.cross(x)).squeeze(1)


def build_model(shape: DlrmShape, table_device: torch.device | str | None = None, sparse: bool = True) -> DlrmDcnV2:
    return DlrmDcnV2(shape, table_device, sparse)
