"""Masked-LM accuracy from summed per-shard statistics equals a direct computation over the whole
set with transformers' own full forward (logits at every position, then the masked ones)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from transformers import BertForPreTraining

from trainclock.workload.base import EvalShard
from trainclock.workloads.bert.data.batches import as_tensors
from trainclock.workloads.bert.data.instances import make_instances
from trainclock.workloads.bert.metric import METRIC, mlm_sums, score
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import BertShape
from trainclock.workload.evaluation import evaluating


def small_set(n: int = 37) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(1)
    documents = [[list(rng.integers(5, 200, size=rng.integers(3, 12))) for _ in range(30)] for _ in range(6)]
    return as_tensors(make_instances(documents, n, 32, 5, 200, seed=3))


def direct_accuracy(model, data) -> float:
    with torch.no_grad():
        logits = BertForPreTraining.forward(model, input_ids=data["input_ids"], attention_mask=data["input_mask"],
                                            token_type_ids=data["segment_ids"]).prediction_logits
    predicted = logits.argmax(-1).gather(1, data["masked_lm_positions"])
    real = data["masked_lm_weights"] > 0
    return int((predicted == data["masked_lm_ids"])[real].sum()) / int(real.sum())


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_summed_shards_give_the_accuracy_of_the_whole_set(ranks):
    torch.manual_seed(0)
    model = build_model(BertShape(n_layer=1, hidden=32, n_head=2, intermediate=64, vocab_size=200, max_positions=32), 0.0)
    data = small_set()
    with evaluating(model):  # as the loop evaluates
        shards = [mlm_sums(model, data, 4, (r, ranks), contextlib.nullcontext, torch.device("cpu")) for r in range(ranks)]
    total = EvalShard(sums={k: sum(s.sums[k] for s in shards) for k in shards[0].sums})
    assert float(total.sums["mlm_count"]) == float((data["masked_lm_weights"] > 0).sum())
    assert score(total)[METRIC] == pytest.approx(direct_accuracy(model, data), abs=1e-12)
