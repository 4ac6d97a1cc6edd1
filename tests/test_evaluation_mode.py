"""The loop, not the workload, puts the model in evaluation mode without autograd for an
evaluation, and back in the mode it was in after: a workload's evaluate only scores."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from trainclock.train.step import evaluate_shard
from trainclock.workload.base import EvalShard


@pytest.mark.parametrize("training", [True, False])
def test_an_evaluation_runs_in_eval_mode_without_grad_and_restores_the_mode(training):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Linear(4, 2))
    model.train(training)
    seen = []

    def evaluate(m: nn.Module, autocast, shard: tuple[int, int]) -> EvalShard:
        out = m(torch.ones(5, 3))
        seen.append((m.training, all(not sub.training for sub in m.modules()), torch.is_grad_enabled(), out.requires_grad))
        return EvalShard(sums={"rows": torch.tensor(5.0, dtype=torch.float64)}, gathered=[shard])

    job = SimpleNamespace(model=model, evaluate=evaluate)
    shard = evaluate_shard(job, None, (1, 2))
    assert seen == [(False, True, False, False)]
    assert shard.gathered == [(1, 2)] and model.training is training
    assert torch.is_grad_enabled()


def test_a_failing_evaluation_still_restores_the_mode():
    model = nn.Linear(2, 2).train()

    def evaluate(m, autocast, shard):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        evaluate_shard(SimpleNamespace(model=model, evaluate=evaluate), None, (0, 1))
    assert model.training and torch.is_grad_enabled()
