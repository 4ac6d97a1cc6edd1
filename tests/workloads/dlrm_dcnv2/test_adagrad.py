"""Adagrad as the closed dlrm_dcnv2 rules fix it: the rules' values, every `opt_adagrad_*` key
logged, torch's Adagrad update, and an optimizer step on DLRM's sparse table gradients that reads
and writes only the rows the step's samples looked up (counted), repeated ids summed first."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainclock.optim.adagrad import Adagrad
from trainclock.workloads.dlrm_dcnv2.model import build_model
from trainclock.workloads.dlrm_dcnv2.spec import DENSE_FEATURES, get_member
from tests.host_reads import HostReads


def test_log_keys_are_the_rules_values():
    keys = Adagrad(0.004).log_keys()
    assert keys == {"opt_name": "adagrad", "opt_base_learning_rate": 0.004, "opt_adagrad_learning_rate_decay": 0.0,
                    "opt_weight_decay": 0.0, "opt_adagrad_initial_accumulator_value": 0.0,
                    "opt_adagrad_epsilon": 1e-8, "opt_learning_rate_warmup_steps": 0,
                    "opt_learning_rate_decay_start_step": 0, "opt_learning_rate_decay_steps": 0}
    assert Adagrad(0.004).lr_at(12345) == 0.004
    with pytest.raises(ValueError, match="constant rate"):
        Adagrad(0.004, warmup_steps=10)
    with pytest.raises(ValueError, match="no rate decay or weight decay"):
        Adagrad(0.004, weight_decay=1e-5)


@pytest.mark.parametrize("sparse", [False, True])
def test_rows_not_looked_up_do_not_move_and_looked_up_rows_take_the_adagrad_step(sparse):
    table = nn.EmbeddingBag(10, 4, mode="sum", sparse=sparse)
    before = table.weight.detach().clone()
    optimizer = Adagrad(0.1).build(table)
    table(torch.tensor([[1, 3], [3, 3]])).sum().backward()
    grad = table.weight.grad.to_dense()
    optimizer.step()
    moved = (table.weight.detach() != before).any(dim=1)
    assert moved.tolist() == [i in (1, 3) for i in range(10)]
    # first step with a zero accumulator: w -= lr * g / (sqrt(g^2) + eps) = lr * sign(g)
    expected = before - 0.1 * grad / (grad.abs() + 1e-8)
    assert torch.allclose(table.weight.detach(), expected)


def test_sparse_steps_match_torchs_dense_adagrad_with_repeated_ids_and_micro_batches():
    torch.manual_seed(0)
    sparse = nn.EmbeddingBag(50, 8, mode="sum", sparse=True)
    dense = nn.EmbeddingBag(50, 8, mode="sum")
    dense.load_state_dict(sparse.state_dict())
    ours = Adagrad(0.05).build(sparse)
    theirs = torch.optim.Adagrad(dense.parameters(), lr=0.05, eps=1e-8)
    for step in range(3):
        for micro in range(2):  # gradients accumulate over micro-batches: the sparse ones by concatenation
            ids = torch.randint(0, 12, (16, 5))  # 12 of 50 rows: every id repeats
            signs = torch.randn(16, 8)
            (sparse(ids) * signs).sum().backward()
            (dense(ids) * signs).sum().backward()
        ours.step()
        theirs.step()
        ours.zero_grad(set_to_none=True)
        theirs.zero_grad(set_to_none=True)
    torch.testing.assert_close(sparse.weight, dense.weight, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.state[sparse.weight]["sum"], theirs.state[dense.weight]["sum"])
    # torch's state keys, so checkpoints of either optimizer load into the other
    assert ours.state[sparse.weight].keys() == theirs.state[dense.weight].keys()


def test_one_dlrm_step_touches_only_the_rows_its_samples_looked_up():
    """Counted on dlrm-mini's tables at 64 samples: in every table of more rows than the step
    looked up ids, each row no sample looked up gets a NaN Adagrad sum first, so a step that reads
    it (a dense update: w -= lr * 0 / (sqrt(NaN) + eps)) turns its weight NaN, and a step that
    writes it changes its weight; the sparse step does neither. The smaller tables (fewer rows
    than ids) are summed into a dense gradient and updated whole, at no more work."""
    spec = get_member("dlrm-mini")
    torch.manual_seed(3)
    model = build_model(spec.shape)
    optimizer = Adagrad(spec.learning_rate).build(model)
    samples = 64
    sparse = torch.cat([torch.randint(0, n, (samples, hot)) for n, hot in zip(spec.shape.rows, spec.shape.multi_hot)],
                       dim=1)
    tables = model.tables.tables()
    large = [n > samples * hot for n, hot in zip(spec.shape.rows, spec.shape.multi_hot)]
    looked_up = []
    with torch.no_grad():
        for table, ids, is_large in zip(tables, sparse.split(spec.shape.multi_hot, dim=1), large):
            hit = torch.zeros(table.num_embeddings, dtype=torch.bool)
            hit[ids.reshape(-1)] = True
            if is_large:
                optimizer.state[table.weight]["sum"][~hit] = float("nan")
            looked_up.append(hit)
    before = [t.weight.detach().clone() for t in tables]
    logits = model(torch.randn(samples, DENSE_FEATURES), sparse)
    nn.functional.binary_cross_entropy_with_logits(logits, torch.randint(0, 2, (samples,)).float()).backward()
    assert all(t.weight.grad.is_sparse for t in tables)
    with HostReads() as reads:
        optimizer.step()
    assert reads.count == 0  # nor does it read anything back (torch's Adagrad reads every step count)
    nan_rows = sum(int(t.weight.detach().isnan().any(dim=1).sum()) for t in tables)
    assert nan_rows == 0, f"the step read {nan_rows} rows no sample looked up"
    moved = [(t.weight.detach() != b).any(dim=1) for t, b in zip(tables, before)]
    assert all(torch.equal(m, hit) for m, hit in zip(moved, looked_up))  # each looked-up row moved, no other
    touched = sum(int(hit.sum()) if is_large else n for hit, is_large, n in zip(looked_up, large, spec.shape.rows))
    assert sum(large) == 20 and touched < sum(spec.shape.rows) / 10  # about 3,700 rows of 65,121
