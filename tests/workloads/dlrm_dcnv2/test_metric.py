"""AUC over the whole validation set: torchmetrics' BinaryAUROC on the predictions gathered from
every rank equals a direct Mann-Whitney computation (ties counted half), the shards' evaluation
adds up to the single-process one, and it is not the mean of per-rank AUCs."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from tests.workloads.dlrm_dcnv2.files import write_days
from trainclock.workload.base import EvalShard
from trainclock.workloads.dlrm_dcnv2.data.clicks import best_auc
from trainclock.workloads.dlrm_dcnv2.data.dataset import open_days
from trainclock.workloads.dlrm_dcnv2.metric import predictions, score
from trainclock.workloads.dlrm_dcnv2.model import build_model
from trainclock.workloads.dlrm_dcnv2.spec import tier_shape
from trainclock.workload.evaluation import evaluating


def direct_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """P(score of a random positive > score of a random negative) + P(tie) / 2, over all pairs."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def test_auc_of_gathered_predictions_matches_the_direct_formula_with_ties():
    rng = np.random.default_rng(3)
    labels = (rng.random(3000) < 0.25).astype(np.int64)
    scores = np.round(rng.random(3000) * 0.5 + 0.3 * labels, 2).astype(np.float32)  # rounded: many ties
    shards = [(torch.from_numpy(s), torch.from_numpy(lab).float())
              for s, lab in zip(np.array_split(scores, 3), np.array_split(labels, 3))]
    auc = score(EvalShard(gathered=shards))["AUC"]
    assert auc == pytest.approx(direct_auc(scores, labels), abs=1e-6)
    assert auc == pytest.approx(best_auc(scores, labels), abs=1e-6)  # the rank formula the data module uses
    per_rank = np.mean([direct_auc(s.numpy(), lab.numpy().astype(int)) for s, lab in shards])
    assert abs(per_rank - auc) > 1e-4  # a mean of per-rank AUCs is a different number


def test_sharded_evaluation_gathers_exactly_the_single_process_predictions(tmp_path):
    shape = tier_shape(50, 8, (16, 8), (16, 1), 8)
    folder = write_days(tmp_path, 2, 101, shape.multi_hot, id_range=1000)  # an odd eval half: 51 rows
    days = open_days(folder, 1, shape.rows, shape.multi_hot, global_batch_size=10)
    torch.manual_seed(0)
    model = build_model(shape)
    run = lambda shard: predictions(model, days, 8, shard, contextlib.nullcontext, torch.device("cpu"))  # noqa: E731
    with evaluating(model):  # as the loop evaluates
        whole = run((0, 1)).gathered
        parts = [item for rank in range(3) for item in run((rank, 3)).gathered]
    # the same rows in the same order (forwards of other sizes round differently in the last bits)
    assert torch.allclose(torch.cat([s for s, _ in parts]), torch.cat([s for s, _ in whole]), atol=1e-6)
    assert torch.equal(torch.cat([lab for _, lab in parts]), days.validation_rows(0, 51)["labels"])
    assert score(EvalShard(gathered=parts))["AUC"] == pytest.approx(score(EvalShard(gathered=whole))["AUC"], abs=1e-6)


def test_auc_equals_sklearn_roc_auc_score_on_the_same_predictions():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(11)
    labels = (rng.random(20_000) < 0.03).astype(np.int64)  # a click rate as low as Criteo's
    # sigmoid outputs of a weak model, rounded to float16's grid as bf16 evaluation leaves them: ties
    scores = (1 / (1 + np.exp(-(rng.normal(size=20_000) + 0.8 * labels)))).astype(np.float16).astype(np.float32)
    shards = [(torch.from_numpy(s), torch.from_numpy(lab).float())
              for s, lab in zip(np.array_split(scores, 4), np.array_split(labels, 4))]
    assert score(EvalShard(gathered=shards))["AUC"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-6)
