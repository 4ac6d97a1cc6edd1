"""Sum-pooled embedding tables too large for one process, laid over the ranks of a data-parallel
group by a plan (distributed/table_plan.py), table by table:

- replicated: every rank holds the table and pools its own samples; the dense gradient is
  all-reduced with the MLPs' by DDP (tiny tables only: DDP all-reduces no sparse gradient on NCCL).
- table-wise: the table lives whole on one rank. Every rank sends each owner the ids of that
  owner's tables for its own samples (all-to-all), the owner pools them, and the pooled rows go
  back by a second all-to-all.
- row-wise: the table's rows are split over every rank. Every rank sees every rank's ids of such
  tables (all-gather), pools those that fall in its rows into a partial sum per sample, and a
  reduce-scatter sums the partials and hands each rank its samples.

Sharded tables (table- and row-wise) have sparse gradients: only the rows looked up, on the rank
that holds them (the optimizer updates those rows only, optim/adagrad.py). The exchanges that
carry values use torch.distributed.nn.functional's collectives, whose backward is the reverse
exchange, so the gradients arrive where the rows live; ids go through distributed/collectives.py.
Nothing here knows which model uses the tables. Parameter names are those of
EmbeddingBagCollection ("<i>.weight"), so a checkpoint of any layout loads into any other, at any
world size: a table-wise or replicated table is one whole tensor, a row-wise table a plain tensor
of this rank's rows that state dicts show as the whole table's DTensor (distributed/local_shards.py).
The dense rest of the model stays data parallel: `parallelize.data_parallel_ignored` names the sharded
parameters DDP must leave alone.
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

from trainclock.distributed import collectives, local_shards
from trainclock.distributed.local_shards import SHARD_GROUP
from trainclock.distributed.table_plan import TablePlan

# torch 2.14 marks torch.distributed.nn.functional deprecated in favour of a private module
# (_functional_collectives); the public autograd collectives are kept until it has a public one
warnings.filterwarnings("ignore", category=FutureWarning, message=r"torch\.distributed\.nn\.functional")


class EmbeddingBagCollection(nn.Module):
    """Every table on this process: ids (B, sum of bag sizes), each table's fixed-size bags side by
    side, -> pooled rows (B, tables x dim) in table order."""

    def __init__(self, rows: Sequence[int], dim: int, bag_sizes: Sequence[int],
                 device: torch.device | str | None = None, sparse: bool = True) -> None:
        """device "meta": tables with a shape and no storage, for a sharded collection to hold
        only its part of (tables too large for one process). sparse: gradients of the rows looked
        up only (False where DDP all-reduces the tables: it takes no sparse gradient on NCCL)."""
        super().__init__()
        if len(rows) != len(bag_sizes):
            raise ValueError(f"{len(rows)} tables but {len(bag_sizes)} bag sizes")
        self.rows, self.dim, self.bag_sizes = tuple(rows), dim, tuple(bag_sizes)
        for i, n in enumerate(rows):
            self.add_module(str(i), nn.EmbeddingBag(n, dim, mode="sum", device=device, sparse=sparse))
        run_eagerly(EmbeddingBagCollection)  # inductor cannot compile sparse gradients

    def tables(self) -> list[nn.EmbeddingBag]:
        return [getattr(self, str(i)) for i in range(len(self.rows))]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # a 2D input to EmbeddingBag is one bag per row
        return torch.cat([t(b) for t, b in zip(self.tables(), ids.split(self.bag_sizes, dim=1))], dim=1)


def run_eagerly(cls: type[nn.Module]) -> None:
    """Under --compile `cls`'s forward runs eagerly and the rest of the model compiles.
    torch.compiler.disable is applied when the first module of the class is built, not as a
    decorator: it imports torch._dynamo (0.5 s), which every trainclock command would then pay."""
    if not getattr(cls.forward, "_trainclock_eager", False):
        cls.forward = torch.compiler.disable(cls.forward)
        cls.forward._trainclock_eager = True


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
    """An EmbeddingBagCollection laid over the ranks of `mesh` (1-D) by `plan`; the forward takes
    this rank's ids (its own batch size; ranks may differ) and returns its pooled rows.

    The tables start as those of `full`: copied when it holds them (every rank the same, so a
    sharded run starts where one process would), or, when they are on the meta device, made
    here on the mesh's device at their local size and filled by `init(part, table rows)`.

    grad_scale multiplies the gradients reaching the sharded tables: the exchange sums each row's
    gradient over every rank's samples, while a data-parallel loss is each rank's mean over its
    own samples and DDP averages the dense gradients (the replicated tables' too); 1/ranks makes
    the sharded tables' gradients that of the global mean as well."""

    def __init__(self, full: EmbeddingBagCollection, plan: TablePlan, mesh: DeviceMesh, grad_scale: float = 1.0,
                 init: Callable[[torch.Tensor, int], None] | None = None) -> None:
        super().__init__()
        run_eagerly(ShardedEmbeddingBagCollection)  # sparse gradients, and exchanges whose sizes are read on the host
        self.rows, self.dim, self.bag_sizes = full.rows, full.dim, full.bag_sizes
        if plan.rows != self.rows or plan.ranks != mesh.size():
            raise ValueError(f"a plan for {len(plan.rows)} tables over {plan.ranks} ranks does not fit "
                             f"{len(self.rows)} tables over {mesh.size()}")
        self.plan, self.grad_scale = plan, grad_scale
        self.ranks, self.rank = mesh.size(), mesh.get_local_rank()
        # the exchanges get a group of their own: DDP's bucket all-reduces run on the mesh's group
        # from the same backward, and two streams of collectives must not interleave on one group
        self.group = dist.new_group(dist.get_process_group_ranks(mesh.get_group()))
        starts = [0]
        for size in self.bag_sizes:
            starts.append(starts[-1] + size)
        self.columns = [(starts[t], starts[t + 1]) for t in range(len(self.rows))]
        self.replicated, self.row_wise = plan.tables("replicated"), plan.tables("row")
        self.owned_by = [[t for t in plan.tables("table") if plan.owner[t] == r] for r in range(self.ranks)]
        tables = full.tables()
        if init is None and any(t.weight.is_meta for t in tables):
            raise ValueError("tables on the meta device need an init to fill this rank's part")
        device = torch.device(mesh.device_type)
        for t, table in enumerate(tables):
            placement = plan.placement[t]
            if placement == "table" and plan.owner[t] != self.rank:
                continue
            first, last = plan.row_range(t, self.rank) if placement == "row" else (0, self.rows[t])
            weight = self._make(table.weight, first, last, device, init)
            if placement == "row":
                local_shards.mark(weight, local_shards.RowBlock(mesh, self.rows[t], first))
            if placement != "replicated":  # held by one rank alone: the gradient norm sums it over the group
                setattr(weight, SHARD_GROUP, self.group)
            holder = nn.Module()
            holder.weight = weight
            self.add_module(str(t), holder)
        local_shards.present_module_state(self)

    def _make(self, whole: torch.Tensor, first: int, last: int, device: torch.device,
              init: Callable[[torch.Tensor, int], None] | None) -> nn.Parameter:
        """Rows [first, last) of a table: copied from `whole`, or drawn by `init` when it is on meta."""
        if not whole.is_meta:
            return nn.Parameter(whole.detach()[first:last].clone())
        local = torch.empty(last - first, self.dim, dtype=whole.dtype, device=device)
        with torch.no_grad():
            init(local, whole.shape[0])
        return nn.Parameter(local)

    def _weight(self, t: int) -> torch.Tensor:
        return getattr(self, str(t)).weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pooled: dict[int, torch.Tensor] = {
            t: F.embedding_bag(ids[:, slice(*self.columns[t])], self._weight(t), mode="sum") for t in self.replicated}
        if self.row_wise or any(self.owned_by):
            sizes = self._batch_sizes(ids.shape[0], ids.device)
            if any(self.owned_by):
                pooled.update(self._table_wise(ids, sizes))
            if self.row_wise:
                pooled.update(self._row_wise(ids, sizes))
        return torch.cat([pooled[t] for t in range(len(self.rows))], dim=1)

    def _scaled(self, exchanged: torch.Tensor) -> torch.Tensor:
        return _ScaleGrad.apply(exchanged, self.grad_scale) if torch.is_grad_enabled() else exchanged

    def _batch_sizes(self, batch: int, device: torch.device) -> list[int]:
        """Every rank's batch size: evaluation's last forwards differ between ranks."""
        mine = torch.tensor([batch], dtype=torch.int64, device=device)
        return [int(s) for s in collectives.all_gather(mine, group=self.group)]

    def _columns_of(self, ids: torch.Tensor, tables: Sequence[int]) -> torch.Tensor:
        """The columns of `tables`' bags, side by side (B, 0) when there are none."""
        if not tables:
            return ids.new_empty(ids.shape[0], 0)
        return torch.cat([ids[:, slice(*self.columns[t])] for t in tables], dim=1)

    def _table_wise(self, ids: torch.Tensor, sizes: list[int]) -> dict[int, torch.Tensor]:
        batch, owned_by, mine = ids.shape[0], self.owned_by, self.owned_by[self.rank]
        width = [sum(self.bag_sizes[t] for t in owned_by[r]) for r in range(self.ranks)]
        # ids out: to each owner, the columns of its tables for this rank's samples
        send = torch.cat([self._columns_of(ids, owned_by[r]).reshape(-1) for r in range(self.ranks)])
        got = torch.empty(sum(sizes) * width[self.rank], dtype=ids.dtype, device=ids.device)
        collectives.all_to_all_single(got, send, [s * width[self.rank] for s in sizes],
                                      [batch * w for w in width], group=self.group)
        if mine:
            bags = got.view(sum(sizes), width[self.rank]).split([self.bag_sizes[t] for t in mine], dim=1)
            local = torch.cat([F.embedding_bag(b, self._weight(t), mode="sum", sparse=True)
                               for t, b in zip(mine, bags)], dim=1)
        else:  # no table here: an empty block that still takes part in the backward's exchange
            local = torch.zeros(sum(sizes), 0, device=ids.device, requires_grad=torch.is_grad_enabled())
        # pooled rows back: each rank its own samples, from every owner
        dims = [len(owned_by[r]) * self.dim for r in range(self.ranks)]
        back = torch.empty(batch * sum(dims), dtype=local.dtype, device=local.device)
        back = self._scaled(dnn.all_to_all_single(back, local.reshape(-1), [batch * d for d in dims],
                                                  [s * dims[self.rank] for s in sizes], group=self.group))
        per_table: dict[int, torch.Tensor] = {}
        for r, block in enumerate(back.split([batch * d for d in dims])):
            for t, column in zip(owned_by[r], block.view(batch, dims[r]).split(self.dim, dim=1)):
                per_table[t] = column
        return per_table

    def _row_wise(self, ids: torch.Tensor, sizes: list[int]) -> dict[int, torch.Tensor]:
        most = max(sizes)
        # padded to the largest batch with id -1, which falls in no rank's rows
        mine = F.pad(self._columns_of(ids, self.row_wise), (0, 0, 0, most - ids.shape[0]), value=-1)
        # (ranks x most, columns of the row-wise tables): rank r's samples at rank r x most
        all_ids = torch.cat(collectives.all_gather(mine, group=self.group))
        partial = []
        for cols, t in zip(all_ids.split([self.bag_sizes[t] for t in self.row_wise], dim=1), self.row_wise):
            first, last = self.plan.row_range(t, self.rank)
            inside = (cols >= first) & (cols < last)
            # only the ids in this rank's rows are looked up (their sparse gradient is 1/ranks of
            # the ids); the mask keeps each sample's ids in order, so a bag's offset is a count
            counts = inside.sum(dim=1)
            partial.append(F.embedding_bag(cols[inside] - first, self._weight(t), counts.cumsum(0) - counts,
                                           mode="sum", sparse=True))
        sums = torch.cat(partial, dim=1)
        out = torch.empty(most, sums.shape[1], dtype=sums.dtype, device=sums.device)
        out = self._scaled(dnn.reduce_scatter(out, list(sums.split(most)), group=self.group))[:sizes[self.rank]]
        return dict(zip(self.row_wise, out.split(self.dim, dim=1)))


def shard_embeddings(model: nn.Module, plan: TablePlan, mesh: DeviceMesh, grad_scale: float,
                     init: Callable[[torch.Tensor, int], None] | None = None) -> list[str]:
    """Replace every EmbeddingBagCollection in `model` by its form laid out by `plan`, in place;
    returns the names of the sharded (table- and row-wise) parameters (for parallelize.data_parallel_ignored)."""
    names = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, EmbeddingBagCollection):
                sharded = ShardedEmbeddingBagCollection(child, plan, mesh, grad_scale, init)
                setattr(parent, child_name, sharded)
                prefix = f"{parent_name}.{child_name}" if parent_name else child_name
                names += [f"{prefix}.{n}" for n, p in sharded.named_parameters() if hasattr(p, SHARD_GROUP)]
    return names
