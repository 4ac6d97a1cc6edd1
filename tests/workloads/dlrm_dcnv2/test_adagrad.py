"""Adagrad as the closed dlrm_dcnv2 rules fix it: torch's Adagrad with the rules' values, every
`opt_adagrad_*` key logged, and a dense-gradient update that leaves rows no sample looked up
exactly where they were (the sparse, "exact" Adagrad of the reference's embedding tables)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainclock.optim.adagrad import Adagrad


def test_log_keys_are_the_rules_values():
    keys = Adagrad(0.004).log_keys()
    assert keys == {"opt_name": "adagrad", "opt_base_learning_rate": 0.004, "opt_adagrad_learning_rate_decay": 0.0,
                    "opt_weight_decay": 0.0, "opt_adagrad_initial_accumulator_value": 0.0,
                    "opt_adagrad_epsilon": 1e-8, "opt_learning_rate_warmup_steps": 0,
                    "opt_learning_rate_decay_start_step": 0, "opt_learning_rate_decay_steps": 0}
    assert Adagrad(0.004).lr_at(12345) == 0.004
    with pytest.raises(ValueError, match="constant rate"):
        Adagrad(0.004, warmup_steps=10)


def test_rows_not_looked_up_do_not_move_and_looked_up_rows_take_the_adagrad_step():
    table = nn.EmbeddingBag(10, 4, mode="sum")
    before = table.weight.detach().clone()
    optimizer = Adagrad(0.1).build(table)
    table(torch.tensor([[1, 3], [3, 3]])).sum().backward()
    grad = table.weight.grad.clone()
    optimizer.step()
    moved = (table.weight.detach() != before).any(dim=1)
    assert moved.tolist() == [i in (1, 3) for i in range(10)]
    # first step with a zero accumulator: w -= lr * g / (sqrt(g^2) + eps) = lr * sign(g)
    expected = before - 0.1 * grad / (grad.abs() + 1e-8)
    assert torch.allclose(table.weight.detach(), expected)
