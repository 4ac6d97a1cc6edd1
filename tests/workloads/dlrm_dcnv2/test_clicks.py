"""The tiers' click model: deterministic from its seed, about 25% clicks, Zipf-skewed ids, a best
achievable AUC near Criteo's (about 0.8, known because the true probabilities are), and a target
that a trivial model (the dense features alone) cannot reach."""

from __future__ import annotations

import numpy as np

from trainclock.workloads.dlrm_dcnv2.data.clicks import DATA_SEED, ClickModel, best_auc, calibrated
from trainclock.workloads.dlrm_dcnv2.spec import METRIC, get_member


def draw(seed: int = DATA_SEED):
    spec = get_member("dlrm-tiny")
    rng = np.random.default_rng(seed)
    model = calibrated(ClickModel.draw(spec.shape.rows, spec.shape.multi_hot, rng), rng)
    dense, sparse, logit = model.sample(20_000, np.random.default_rng([seed, 1]))
    probability = 1 / (1 + np.exp(-(logit + model.offset)))
    labels = (np.random.default_rng([seed, 2]).random(len(probability)) < probability).astype(np.int32)
    return spec, dense, sparse, probability, labels


def test_the_click_log_is_deterministic_with_a_realistic_rate_and_skewed_ids():
    spec, dense, sparse, probability, labels = draw()
    _, dense2, sparse2, _, labels2 = draw()
    assert np.array_equal(dense, dense2) and np.array_equal(labels, labels2)
    assert all(np.array_equal(a, b) for a, b in zip(sparse, sparse2))
    assert 0.22 < labels.mean() < 0.28
    counts = np.bincount(sparse[0].ravel(), minlength=spec.shape.rows[0])
    top = np.sort(counts)[::-1]
    assert top[:10].sum() > 0.3 * counts.sum()  # a few popular ids carry much of the traffic (Zipf 1.1)
    assert all(a.dtype == np.int32 and a.shape == (20_000, m) for a, m in zip(sparse, spec.shape.multi_hot))


def test_target_sits_between_a_trivial_model_and_the_best_achievable_auc():
    spec, dense, _, probability, labels = draw()
    best = best_auc(probability, labels)
    assert 0.8 < best < 0.86
    # the best any function of the dense features alone can do here: their true share of the logit
    x = np.c_[dense, np.ones(len(dense))]
    w = np.linalg.lstsq(x, np.log(probability / (1 - probability)), rcond=None)[0]
    trivial = best_auc(x @ w, labels)
    assert trivial + 0.05 < spec.targets[METRIC] < best - 0.03
