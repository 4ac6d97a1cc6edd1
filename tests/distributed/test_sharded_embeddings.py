"""Sharded embedding tables on 2 real processes (gloo): table-wise and row-wise, each rank with its
own batch size (as evaluation's last forwards), give every rank the pooled rows of the unsharded
collection, put the gradient of the global loss on the rows each rank holds, and the gradient
norm of the shards is the norm of the whole. Layout choice and table assignment are checked
without processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainclock.distributed.embeddings import EmbeddingBagCollection, ShardedEmbeddingBagCollection, assign_tables
from trainclock.distributed.grads import grad_norm

ROWS = (7, 3, 20, 1, 12)  # a table of 1 row: row-wise leaves one rank without any of it
BAGS = (2, 1, 3, 1, 2)
DIM = 4
BATCH = (5, 3)  # rows of ids per rank


def ids_of(rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.cat([torch.randint(0, n, (BATCH[rank], b), generator=g) for n, b in zip(ROWS, BAGS)], dim=1)


def weights_of(rank: int) -> torch.Tensor:
    return torch.randn(BATCH[rank], len(ROWS) * DIM, generator=torch.Generator().manual_seed(200 + rank))


def _worker(rank: int, layout: str, init: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
        torch.manual_seed(0)
        full = EmbeddingBagCollection(ROWS, DIM, BAGS)
        # the reference: the whole collection on the concatenated global batch, loss summed over ranks
        everyone = torch.cat([ids_of(r) for r in range(2)])
        (full(everyone) * torch.cat([weights_of(r) for r in range(2)])).sum().backward()
        expected = full(ids_of(rank)).detach()
        sharded = ShardedEmbeddingBagCollection(full, layout, mesh)
        out = sharded(ids_of(rank))
        torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
        (out * weights_of(rank)).sum().backward()
        for name, p in sharded.named_parameters():
            t = int(name.split(".")[0])
            want = full.tables()[t].weight.grad
            if layout == "row":
                first, last = sharded.row_range[t]
                got, want = p.grad.to_local(), want[first:last]
            else:
                got = p.grad
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        whole = grad_norm(list(full.parameters()))
        torch.testing.assert_close(grad_norm(list(sharded.parameters())), whole, rtol=1e-5, atol=1e-6)
        with torch.no_grad():  # evaluation: no autograd, same exchange
            torch.testing.assert_close(sharded(ids_of(rank)), expected, rtol=1e-6, atol=1e-6)
        # tables too large for one process: on the meta device, each rank fills only its part
        row_value = lambda part, rows: part.copy_(torch.arange(part.numel()).view_as(part) % 7 + rows)  # noqa: E731
        made = ShardedEmbeddingBagCollection(EmbeddingBagCollection(ROWS, DIM, BAGS, device="meta"), layout, mesh,
                                             init=row_value)
        assert not any(p.is_meta for p in made.parameters())
        local = sum((p.to_local() if layout == "row" else p).numel() for p in made.parameters())
        assert local < sum(ROWS) * DIM  # a part of the tables, not all of them
        with torch.no_grad():
            reference = EmbeddingBagCollection(ROWS, DIM, BAGS)
            for t, table in enumerate(reference.tables()):
                if layout == "row":  # each rank's rows were filled as a part of their own
                    parts = [(0, -(-ROWS[t] // 2)), (-(-ROWS[t] // 2), ROWS[t])]
                    for a, b in parts:
                        row_value(table.weight[a:b], ROWS[t])
                else:
                    row_value(table.weight, ROWS[t])
            torch.testing.assert_close(made(ids_of(rank)), reference(ids_of(rank)))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("layout", ["table", "row"])
def test_sharded_tables_match_the_whole_collection_on_two_processes(layout, tmp_path):
    mp.spawn(_worker, args=(layout, f"file://{tmp_path / 'store'}"), nprocs=2, join=True)


def test_tables_are_dealt_largest_first_to_the_least_loaded_rank():
    # 40 -> rank 0; 30 -> rank 1; 20 -> rank 1 (30 < 40); 10 -> rank 0 (40 < 50): 50 rows each
    assert assign_tables((10, 40, 30, 20), 2) == [0, 0, 1, 1]
    assert assign_tables((5, 5, 5), 3) == [0, 1, 2]


def test_layout_choice_and_its_refusals():
    from trainclock.distributed.layout import Layout
    from trainclock.errors import UsageError
    from trainclock.workloads.dlrm_dcnv2.sharding import embedding_sharding

    assert embedding_sharding(None, Layout(), 26) == "none"
    assert embedding_sharding(None, Layout(dp=2), 26) == "table"
    assert embedding_sharding(None, Layout(dp=32), 26) == "row"
    assert embedding_sharding("row", Layout(dp=2), 26) == "row"
    with pytest.raises(UsageError, match="add --nproc 2 or more"):
        embedding_sharding("row", Layout(), 26)
    with pytest.raises(UsageError, match="use --embedding-sharding row"):
        embedding_sharding("table", Layout(dp=32), 26)
    with pytest.raises(UsageError, match="drop --fsdp"):
        embedding_sharding("table", Layout(dp=2, fsdp=True), 26)
