"""Sharded embedding tables on 2 real processes (gloo): table-wise, row-wise and the planner's mix
(replicated, table- and row-wise at once), each rank with its own batch size (as evaluation's last
forwards), give every rank the pooled rows of the unsharded collection, put the gradient of the
global loss on the rows each rank holds (sparse: the rows looked up only), the gradient norm of
the shards is the norm of the whole, and a checkpoint written by the 2 ranks loads into one
process's whole tables. The plans and the layout choice are checked without processes."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainclock.distributed.embeddings import EmbeddingBagCollection, ShardedEmbeddingBagCollection
from trainclock.distributed.grads import grad_norm
from trainclock.distributed.table_plan import TablePlan, assign_tables, plan_tables
from trainclock.optim.adagrad import Adagrad

ROWS = (7, 3, 20, 1, 12)  # a table of 1 row: row-wise leaves one rank without any of it
BAGS = (2, 1, 3, 1, 2)
DIM = 4
BATCH = (5, 3)  # rows of ids per rank
# the planner's mix at 4 samples a rank: 3 and 1 rows replicated, 20 (over half of the 39
# sharded rows) row-wise, 7 and 12 whole on a rank each
AUTO = plan_tables("auto", ROWS, 2, 4)


def plan_of(layout: str) -> TablePlan:
    return AUTO if layout == "auto" else plan_tables(layout, ROWS, 2, 4)


def ids_of(rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(100 + rank)
    return torch.cat([torch.randint(0, n, (BATCH[rank], b), generator=g) for n, b in zip(ROWS, BAGS)], dim=1)


def weights_of(rank: int) -> torch.Tensor:
    return torch.randn(BATCH[rank], len(ROWS) * DIM, generator=torch.Generator().manual_seed(200 + rank))


def _worker(rank: int, layout: str, init: str, folder: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
        plan = plan_of(layout)
        torch.manual_seed(0)
        full = EmbeddingBagCollection(ROWS, DIM, BAGS)
        # the reference: the whole collection on the concatenated global batch, loss summed over
        # ranks; a replicated table, without DDP here, gets its own rank's part of that gradient
        everyone = torch.cat([ids_of(r) for r in range(2)])
        (full(everyone) * torch.cat([weights_of(r) for r in range(2)])).sum().backward()
        whole_grads = [t.weight.grad.to_dense() for t in full.tables()]
        full.zero_grad()
        (full(ids_of(rank)) * weights_of(rank)).sum().backward()
        own_grads = [t.weight.grad.to_dense() for t in full.tables()]
        expected = full(ids_of(rank)).detach()
        sharded = ShardedEmbeddingBagCollection(full, plan, mesh)
        out = sharded(ids_of(rank))
        torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
        (out * weights_of(rank)).sum().backward()
        looked_up = torch.cat([ids_of(r) for r in range(2)])
        for name, p in sharded.named_parameters():
            t = int(name.split(".")[0])
            placement = plan.placement[t]
            if placement == "replicated":
                torch.testing.assert_close(p.grad, own_grads[t], rtol=1e-5, atol=1e-6)
                continue
            assert p.grad.is_sparse  # the rows looked up only, on the rank that holds them
            first, last = plan.row_range(t, rank) if placement == "row" else (0, ROWS[t])
            torch.testing.assert_close(p.grad.to_dense(), whole_grads[t][first:last], rtol=1e-5, atol=1e-6)
            column = looked_up[:, sum(BAGS[:t]):sum(BAGS[:t + 1])]
            held = set(column[(column >= first) & (column < last)].tolist())
            assert set(p.grad.coalesce().indices()[0].add(first).tolist()) <= held
        shards = [p for p in sharded.parameters() if p.grad.is_sparse]
        whole_norm = torch.linalg.vector_norm(torch.stack([g.norm() for t, g in enumerate(whole_grads)
                                                           if plan.placement[t] != "replicated"]))
        torch.testing.assert_close(grad_norm(shards), whole_norm, rtol=1e-5, atol=1e-6)
        with torch.no_grad():  # evaluation: no autograd, same exchange
            torch.testing.assert_close(sharded(ids_of(rank)), expected, rtol=1e-6, atol=1e-6)
        # a checkpoint of one optimizer step, each rank writing its own rows (read back by the test)
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        optimizer = Adagrad(0.1).build(sharded)
        optimizer.step()
        model_sd, optim_sd = get_state_dict(sharded, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=f"{folder}/step")
        mine = {name: (p.detach(), optimizer.state[p]["sum"]) for name, p in sharded.named_parameters()}
        torch.save(mine, f"{folder}/rank{rank}.pt")
        # tables too large for one process: on the meta device, each rank fills only its part
        row_value = lambda part, rows: part.copy_(torch.arange(part.numel()).view_as(part) % 7 + rows)  # noqa: E731
        made = ShardedEmbeddingBagCollection(EmbeddingBagCollection(ROWS, DIM, BAGS, device="meta"), plan, mesh,
                                             init=row_value)
        assert not any(p.is_meta for p in made.parameters())
        local = sum(p.numel() for p in made.parameters())
        assert local < sum(ROWS) * DIM  # a part of the tables, not all of them
        with torch.no_grad():
            reference = EmbeddingBagCollection(ROWS, DIM, BAGS)
            for t, table in enumerate(reference.tables()):
                if plan.placement[t] == "row":  # each rank's rows were filled as a part of their own
                    parts = [(0, -(-ROWS[t] // 2)), (-(-ROWS[t] // 2), ROWS[t])]
                    for a, b in parts:
                        row_value(table.weight[a:b], ROWS[t])
                else:
                    row_value(table.weight, ROWS[t])
            torch.testing.assert_close(made(ids_of(rank)), reference(ids_of(rank)))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("layout", ["table", "row", "auto"])
def test_sharded_tables_match_the_whole_collection_on_two_processes(layout, tmp_path):
    mp.spawn(_worker, args=(layout, f"file://{tmp_path / 'store'}", str(tmp_path)), nprocs=2, join=True)
    # the 2 ranks' checkpoint loads into one process's whole tables and Adagrad sums
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    plan = plan_of(layout)
    whole = EmbeddingBagCollection(ROWS, DIM, BAGS)
    optimizer = Adagrad(0.1).build(whole)
    model_sd, optim_sd = get_state_dict(whole, optimizer)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(tmp_path / "step"))
    set_state_dict(whole, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for t, table in enumerate(whole.tables()):
        key = f"{t}.weight"
        held = [r[key] for r in ranks if key in r]
        if plan.placement[t] == "row":
            held = [tuple(torch.cat([h[i] for h in held]) for i in (0, 1))]
        # whole on its owner; a replicated table as one of the ranks holds it (DCP writes each
        # replicated tensor once, from any rank; DDP keeps the ranks alike in a run, not here)
        assert any(torch.equal(table.weight.detach(), weight) for weight, _ in held)
        assert any(torch.equal(optimizer.state[table.weight]["sum"], state_sum) for _, state_sum in held)


def test_tables_are_dealt_largest_first_to_the_least_loaded_rank():
    # 40 -> rank 0; 30 -> rank 1; 20 -> rank 1 (30 < 40); 10 -> rank 0 (40 < 50): 50 rows each
    assert assign_tables((10, 40, 30, 20), 2) == [0, 0, 1, 1]
    assert assign_tables((5, 5, 5), 3) == [0, 1, 2]
    assert assign_tables((5, 5), 3, start=(0, 1, 0)) == [0, 2]  # after what each already holds


def test_the_auto_plan_splits_the_largest_tables_keeps_the_others_whole_and_copies_the_tiny_ones():
    assert AUTO.placement == ("table", "replicated", "row", "replicated", "table")
    assert AUTO.owner == (1, -1, -1, -1, 0)  # 12 rows to rank 0 (it holds row 10 of 20 too), then 7 to rank 1
    assert [AUTO.rows_on(r) for r in range(2)] == [4 + 10 + 12, 4 + 10 + 7]
    # the official tables on 8 ranks of 6,912 samples: the five 40M tables row-wise
    from trainclock.workloads.dlrm_dcnv2.spec import CRITEO_ROWS

    criteo = plan_tables("auto", CRITEO_ROWS, 8, 6912)
    assert criteo.tables("row") == [t for t, n in enumerate(CRITEO_ROWS) if n == 40_000_000]
    assert criteo.tables("replicated") == [t for t, n in enumerate(CRITEO_ROWS) if n <= 6912]
    assert criteo.fullest() < 1.2 * sum(CRITEO_ROWS) / 8  # table-wise alone: 40M rows on 5 ranks
    # 5 tables of 40M over 4 ranks cannot be dealt whole evenly: one is split
    four = plan_tables("auto", CRITEO_ROWS, 4, 13824)
    assert len(four.tables("row")) == 1 and four.fullest() < 1.2 * four.mean()


def test_a_plan_refuses_what_it_cannot_lay_out():
    with pytest.raises(ValueError, match="unknown embedding layout 'column'"):
        plan_tables("column", ROWS, 2, 4)
    with pytest.raises(ValueError, match="at least 1 rank"):
        plan_tables("auto", ROWS, 0, 4)


def test_layout_choice_and_its_refusals():
    from trainclock.distributed.layout import Layout
    from trainclock.errors import UsageError
    from trainclock.workloads.dlrm_dcnv2.sharding import embedding_sharding

    assert embedding_sharding(None, Layout(), 26) == "none"
    assert embedding_sharding(None, Layout(dp=2), 26) == "auto"
    assert embedding_sharding(None, Layout(dp=32), 26) == "auto"
    assert embedding_sharding("row", Layout(dp=2), 26) == "row"
    with pytest.raises(UsageError, match="add --nproc 2 or more"):
        embedding_sharding("row", Layout(), 26)
    with pytest.raises(UsageError, match="use --embedding-sharding auto or row"):
        embedding_sharding("table", Layout(dp=32), 26)
    with pytest.raises(UsageError, match="drop --fsdp"):
        embedding_sharding("table", Layout(dp=2, fsdp=True), 26)


def test_the_gradient_norm_and_clipping_take_sparse_table_gradients():
    """DLRM does not clip, so its loop computes no norm; a model that does gets the norm of the
    summed rows (repeated ids added first) and its sparse gradients scaled like the dense ones."""
    from trainclock.distributed.grads import clip_grads_with_norm

    table, linear = torch.nn.EmbeddingBag(10, 4, mode="sum", sparse=True), torch.nn.Linear(4, 1)
    linear(table(torch.tensor([[1, 3], [3, 3]]))).sum().backward()
    params = [table.weight, *linear.parameters()]
    whole = torch.linalg.vector_norm(torch.cat([table.weight.grad.to_dense().flatten(),
                                                *(p.grad.flatten() for p in linear.parameters())]))
    total = grad_norm(params)
    torch.testing.assert_close(total, whole)
    clip_grads_with_norm(params, 1.0, total)
    assert table.weight.grad.is_sparse
    torch.testing.assert_close(grad_norm(params), torch.tensor(1.0))

