"""Sum-pooled embedding tables too large for one process, split over the ranks of a data-parallel
group, in the two layouts of torchrec's planner:

- table-wise: each table lives whole on one rank (tables dealt largest first to the least loaded
  rank). Every rank sends each owner the ids of that owner's tables for its own samples
  (all-to-all), the owner pools them, and the pooled rows go back by a second all-to-all.
- row-wise: each table's rows are split over every rank (DTensor Shard(0), torch.chunk's split).
  Every rank sees every rank's ids (all-gather), pools the ids that fall in its rows into a
  partial sum per sample, and a reduce-scatter sums the partials and hands each rank its samples.

The exchanges that carry values use torch.distributed.nn.functional's collectives, whose backward
is the reverse exchange, so the tables' gradients arrive where the rows live. Nothing here knows
which model uses the tables. Parameter names are those of EmbeddingBagCollection ("<i>.weight"),
so a checkpoint of any layout loads into any other, at any world size: a table-wise table is one
whole tensor held by one rank, a row-wise table a DTensor that torch.distributed.checkpoint
reshards. The dense rest of the model stays data parallel: `data_parallel_ignored` names the
sharded parameters DDP must leave alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnn
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from trainclock.distributed import collectives
from trainclock.distributed.grads import SHARD_GROUP
from trainclock.errors import UsageError

LAYOUTS = ("table", "row")
# torch 2.14 marks torch.distributed.nn.functional deprecated in favour of a private module
# (_functional_collectives); the public autograd collectives are kept until it has a public one
warnings.filterwarnings("ignore", category=FutureWarning, message=r"torch\.distributed\.nn\.functional")


class EmbeddingBagCollection(nn.Module):
    """Every table on this process: ids (B, sum of bag sizes), each table's fixed-size bags side by
    side, -> pooled rows (B, tables x dim) in table order."""

    def __init__(self, rows: Sequence[int], dim: int, bag_sizes: Sequence[int],
                 device: torch.device | str | None = None) -> None:
        """device "meta": tables with a shape and no storage, for a sharded collection to hold
        only its part of (tables too large for one process)."""
        super().__init__()
        if len(rows) != len(bag_sizes):
            raise ValueError(f"{len(rows)} tables but {len(bag_sizes)} bag sizes")
        self.rows, self.dim, self.bag_sizes = tuple(rows), dim, tuple(bag_sizes)
        for i, n in enumerate(rows):
            self.add_module(str(i), nn.EmbeddingBag(n, dim, mode="sum", device=device))

    def tables(self) -> list[nn.EmbeddingBag]:
        return [getattr(self, str(i)) for i in range(len(self.rows))]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # a 2D input to EmbeddingBag is one bag per row
        return torch.cat([t(b) for t, b in zip(self.tables(), ids.split(self.bag_sizes, dim=1))], dim=1)


def assign_tables(rows: Sequence[int], ranks: int) -> list[int]:
    """The owner of each table: largest first to the rank holding the fewest rows so far (ties to
    the lowest rank), so memory is balanced and every rank computes the same answer."""
    load = [0] * ranks
    owner = [0] * len(rows)
    for t in sorted(range(len(rows)), key=lambda t: (-rows[t], t)):
        rank = min(range(ranks), key=lambda r: (load[r], r))
        owner[t] = rank
        load[rank] += rows[t]
    return owner


class _ScaleGrad(torch.autograd.Function):
    """Identity forward, gradient times `scale` backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad * ctx.scale, None


class ShardedEmbeddingBagCollection(nn.Module):
    """An EmbeddingBagCollection split over the ranks of `mesh` (1-D), table-wise or row-wise; the
    forward takes this rank's ids (its own batch size; ranks may differ) and returns its pooled rows.

    The tables start as those of `full`: copied when it holds them (every rank the same, so a
    sharded run starts where one process would), or, when they are on the meta device, made
    here on the mesh's device at their local size and filled by `init(part, table rows)`.

    grad_scale multiplies the gradients reaching the tables: the exchange sums each row's
    gradient over every rank's samples, while a data-parallel loss is each rank's mean over its
    own samples and DDP averages the dense gradients; 1/ranks makes the tables' gradients that
    of the global mean too."""

    def __init__(self, full: EmbeddingBagCollection, layout: str, mesh: DeviceMesh, grad_scale: float = 1.0,
                 init: Callable[[torch.Tensor, int], None] | None = None) -> None:
        super().__init__()
        if layout not in LAYOUTS:
            raise UsageError(f"unknown embedding sharding {layout!r}; choose one of: {', '.join(LAYOUTS)}")
        self.rows, self.dim, self.bag_sizes = full.rows, full.dim, full.bag_sizes
        self.layout, self.grad_scale = layout, grad_scale
        self.ranks, self.rank = mesh.size(), mesh.get_local_rank()
        # the exchanges get a group of their own: DDP's bucket all-reduces run on the mesh's group
        # from the same backward, and two streams of collectives must not interleave on one group
        self.group = dist.new_group(dist.get_process_group_ranks(mesh.get_group()))
        starts = [0]
        for size in self.bag_sizes:
            starts.append(starts[-1] + size)
        self.columns = [(starts[t], starts[t + 1]) for t in range(len(self.rows))]
        tables = full.tables()
        device = torch.device(mesh.device_type)
        if init is None and any(t.weight.is_meta for t in tables):
            raise ValueError("tables on the meta device need an init to fill this rank's part")
        if layout == "table":
            if len(self.rows) < self.ranks:
                raise UsageError(f"table-wise sharding of {len(self.rows)} tables over {self.ranks} ranks leaves a "
                                 "rank without a table; use --embedding-sharding row")
            owner = assign_tables(self.rows, self.ranks)
            self.owned_by = [[t for t in range(len(self.rows)) if owner[t] == r] for r in range(self.ranks)]
            self.mine = self.owned_by[self.rank]
            for t in self.mine:
                weight = tables[t].weight
                bag = nn.EmbeddingBag(self.rows[t], self.dim, mode="sum", dtype=weight.dtype,
                                      device=device if weight.is_meta else weight.device)
                with torch.no_grad():
                    init(bag.weight, self.rows[t]) if weight.is_meta else bag.weight.copy_(weight)
                # a whole table on one rank: the gradient norm sums its square over the group
                setattr(bag.weight, SHARD_GROUP, self.group)
                self.add_module(str(t), bag)
        else:
            self.row_range = [self._local_rows(t) for t in range(len(self.rows))]
            for t, table in enumerate(tables):
                holder = nn.Module()
                if table.weight.is_meta:
                    first, last = self.row_range[t]
                    local = torch.empty(last - first, self.dim, dtype=table.weight.dtype, device=device)
                    with torch.no_grad():
                        init(local, self.rows[t])
                    weight = DTensor.from_local(local, mesh, [Shard(0)], run_check=False,
                                                shape=(self.rows[t], self.dim), stride=(self.dim, 1))
                else:  # every rank holds the same full table here; distribute_tensor keeps its chunk
                    weight = distribute_tensor(table.weight.detach(), mesh, [Shard(0)])
                holder.weight = nn.Parameter(weight)
                self.add_module(str(t), holder)

    def _local_rows(self, t: int) -> tuple[int, int]:
        """[first, last) global rows of table t held here: torch.chunk's split, as Shard(0)."""
        chunk = -(-self.rows[t] // self.ranks)
        return min(self.rank * chunk, self.rows[t]), min((self.rank + 1) * chunk, self.rows[t])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        sizes = self._batch_sizes(ids.shape[0], ids.device)
        pooled = self._table_wise(ids, sizes) if self.layout == "table" else self._row_wise(ids, sizes)
        return _ScaleGrad.apply(pooled, self.grad_scale) if torch.is_grad_enabled() else pooled

    def _batch_sizes(self, batch: int, device: torch.device) -> list[int]:
        """Every rank's batch size: evaluation's last forwards differ between ranks."""
        mine = torch.tensor([batch], dtype=torch.int64, device=device)
        return [int(s) for s in collectives.all_gather(mine, group=self.group)]

    def _table_wise(self, ids: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        batch, owned_by = ids.shape[0], self.owned_by
        width = [sum(self.bag_sizes[t] for t in owned_by[r]) for r in range(self.ranks)]
        # ids out: to each owner, the columns of its tables for this rank's samples
        send = torch.cat([torch.cat([ids[:, slice(*self.columns[t])] for t in owned_by[r]], dim=1).reshape(-1)
                          for r in range(self.ranks)])
        got = torch.empty(sum(sizes) * width[self.rank], dtype=ids.dtype, device=ids.device)
        collectives.all_to_all_single(got, send, [s * width[self.rank] for s in sizes],
                               [batch * w for w in width], group=self.group)
        mine = got.view(sum(sizes), width[self.rank])
        bags = mine.split([self.bag_sizes[t] for t in self.mine], dim=1)
        pooled = torch.cat([getattr(self, str(t))(b) for t, b in zip(self.mine, bags)], dim=1)
        # pooled rows back: each rank its own samples, from every owner
        dims = [len(owned_by[r]) * self.dim for r in range(self.ranks)]
        back = torch.empty(batch * sum(dims), dtype=pooled.dtype, device=pooled.device)
        back = dnn.all_to_all_single(back, pooled.reshape(-1), [batch * d for d in dims],
                                     [s * dims[self.rank] for s in sizes], group=self.group)
        blocks = back.split([batch * d for d in dims])
        per_table: dict[int, torch.Tensor] = {}
        for r, block in enumerate(blocks):
            for t, column in zip(owned_by[r], block.view(batch, dims[r]).split(self.dim, dim=1)):
                per_table[t] = column
        return torch.cat([per_table[t] for t in range(len(self.rows))], dim=1)

    def _row_wise(self, ids: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        most = max(sizes)
        padded = F.pad(ids, (0, 0, 0, most - ids.shape[0]))
        all_ids = torch.cat(collectives.all_gather(padded, group=self.group))  # (ranks x most, columns): rank r's samples at r x most
        partial = []
        for t, (first, last) in enumerate(self.row_range):
            weight = getattr(self, str(t)).weight.to_local()
            cols = all_ids[:, slice(*self.columns[t])]
            if last == first:  # no rows here (a table smaller than the group): a zero that still has a gradient
                partial.append(torch.zeros(cols.shape[0], self.dim, dtype=weight.dtype, device=weight.device)
                               + weight.sum() * 0)
                continue
            inside = (cols >= first) & (cols < last)
            local = torch.where(inside, cols - first, torch.zeros_like(cols))
            partial.append(F.embedding_bag(local, weight, mode="sum", per_sample_weights=inside.to(weight.dtype)))
        sums = torch.cat(partial, dim=1)
        out = torch.empty(most, sums.shape[1], dtype=sums.dtype, device=sums.device)
        out = dnn.reduce_scatter(out, list(sums.split(most)), group=self.group)
        return out[:sizes[self.rank]]


def shard_embeddings(model: nn.Module, layout: str, mesh: DeviceMesh, grad_scale: float,
                     init: Callable[[torch.Tensor, int], None] | None = None) -> list[str]:
    """Replace every EmbeddingBagCollection in `model` by its sharded form, in place; returns the
    names of the sharded parameters (for data_parallel_ignored)."""
    names = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, EmbeddingBagCollection):
                sharded = ShardedEmbeddingBagCollection(child, layout, mesh, grad_scale, init)
                setattr(parent, child_name, sharded)
                prefix = f"{parent_name}.{child_name}" if parent_name else child_name
                names += [f"{prefix}.{n}" for n, _ in sharded.named_parameters()]
    return names


def data_parallel_ignored(model: nn.Module, names: Sequence[str]) -> None:
    """Tell DDP (wrapping `model` later) to neither broadcast nor all-reduce these parameters."""
    from torch.nn.parallel import DistributedDataParallel

    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(model, list(names))
