"""The CPU tiers' click log, generated from a fixed data seed by a known click model, written as
Criteo multi-hot day files into a cache under the data home (meta.json last: its presence means
complete). The model, per sample:
  dense      13 counts x = floor(exp(1.6 z)), z ~ N(0, 1) mixed by a random matrix, stored as
             log(1 + x) like the Criteo preprocessing
  sparse     per table a bag of ids drawn from a Zipf(1.1) distribution over the table's rows
             (a fixed random permutation decides which ids are popular)
  logit      c + w . dense + sum_t mean over the bag of bias_t[id]
             + sum over table pairs (s, t) of <mean u_s[bag], mean u_t[bag]> + <P dense, mean u_t[bag]>
             with latent vectors u of dimension 4 (the interactions DLRM's cross layers must find)
  label      Bernoulli(sigmoid(logit)); c is set so that about 25% of samples click (the rate of
             Criteo's public display-ads sample)
Because the true click probability of every eval sample is known, so is the best AUC any model can
reach on the eval set: meta.json records it and the target sits below it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainclock.errors import DataError
from trainclock.storage import atomic_write_text, build_once, prepared_path
from trainclock.workloads.dlrm_dcnv2.data.criteo import write_day
from trainclock.workloads.dlrm_dcnv2.spec import DENSE_FEATURES, DlrmSpec

FORMAT_VERSION = 1
DATA_SEED = 2024
LATENT = 4
CLICK_RATE = 0.25
ZIPF = 1.1
COMPONENT_STD = (0.6, 1.0, 0.9, 0.5)  # logit std of: dense features, id effects, id pairs, dense x ids


@dataclass(frozen=True)
class ClickModel:
    rows: tuple[int, ...]
    multi_hot: tuple[int, ...]
    popularity: list[np.ndarray]  # per table: probability of each id
    bias: list[np.ndarray]  # per table: the id's own effect on the logit
    latent: list[np.ndarray]  # per table: (rows, LATENT)
    pairs: list[tuple[int, int]]
    dense_mix: np.ndarray
    dense_weight: np.ndarray
    dense_to_latent: np.ndarray
    dense_tables: list[int]
    scales: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)  # dense, ids, id pairs, dense x ids
    offset: float = 0.0

    @classmethod
    def draw(cls, rows: tuple[int, ...], multi_hot: tuple[int, ...], rng: np.random.Generator) -> "ClickModel":
        tables = len(rows)
        popularity, bias, latent = [], [], []
        strength = rng.choice([0.0, 0.3, 0.8, 1.5], size=tables, p=[0.25, 0.3, 0.3, 0.15])  # some tables say nothing
        for t, n in enumerate(rows):
            p = 1.0 / np.arange(1, n + 1) ** ZIPF
            popularity.append(rng.permutation(p / p.sum()))
            # a bag's mean shrinks the spread by sqrt(bag): scale it back so long bags matter too
            bias.append(rng.normal(0, strength[t] * np.sqrt(multi_hot[t]), n))
            latent.append(rng.normal(0, 0.9 * np.sqrt(np.sqrt(multi_hot[t])), (n, LATENT)))
        pairs = [tuple(sorted(rng.choice(tables, 2, replace=False))) for _ in range(10)]
        return cls(rows, multi_hot, popularity, bias, latent, pairs,
                   dense_mix=rng.normal(0, 1 / np.sqrt(3), (DENSE_FEATURES, DENSE_FEATURES)),
                   dense_weight=rng.normal(0, 0.25, DENSE_FEATURES),
                   dense_to_latent=rng.normal(0, 0.2, (DENSE_FEATURES, LATENT)),
                   dense_tables=list(rng.choice(tables, 4, replace=False)))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """(dense features, sparse bags per table, logits without the offset) of n samples."""
        dense, sparse, parts = self.components(n, rng)
        return dense, sparse, sum(scale * part for scale, part in zip(self.scales, parts))

    def components(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
        z = rng.normal(size=(n, DENSE_FEATURES)) @ self.dense_mix
        dense = np.log1p(np.floor(np.exp(1.6 * z))).astype(np.float32)
        centred = dense - 1.0
        ids_part, pairs_part, cross_part = np.zeros(n), np.zeros(n), np.zeros(n)
        sparse, means = [], []
        for t, (rows, bag) in enumerate(zip(self.rows, self.multi_hot)):
            ids = rng.choice(rows, size=(n, bag), p=self.popularity[t]).astype(np.int32)
            sparse.append(ids)
            ids_part += self.bias[t][ids].mean(axis=1)
            means.append(self.latent[t][ids].mean(axis=1))
        for s, t in self.pairs:
            pairs_part += (means[s] * means[t]).sum(axis=1)
        projected = centred @ self.dense_to_latent
        for t in self.dense_tables:
            cross_part += (projected * means[t]).sum(axis=1)
        return dense, sparse, [centred @ self.dense_weight, ids_part, pairs_part, cross_part]


def calibrated(model: ClickModel, rng: np.random.Generator) -> ClickModel:
    """The model with each part of the logit scaled to its share of COMPONENT_STD (so the best AUC
    is Criteo-like, about 0.8, whatever the table sizes) and the offset c that gives CLICK_RATE,
    found by bisection on a sample."""
    _, _, parts = model.components(20_000, rng)
    scales = tuple(float(want / max(part.std(), 1e-9)) for want, part in zip(COMPONENT_STD, parts))
    logit = sum(scale * part for scale, part in zip(scales, parts))
    model = ClickModel(**{**model.__dict__, "scales": scales})
    lo, hi = -20.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (1 / (1 + np.exp(-(logit + mid)))).mean() < CLICK_RATE else (lo, mid)
    return ClickModel(**{**model.__dict__, "offset": (lo + hi) / 2})


def best_auc(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """The AUC of the true probabilities: what the Bayes-optimal model scores on these labels
    (rank formula with ties counted half, as in the Mann-Whitney U statistic)."""
    from scipy.stats import rankdata

    ranks = rankdata(probabilities)
    positives = labels.astype(bool)
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def cache_folder(spec: DlrmSpec) -> Path:
    return prepared_path("dlrm_dcnv2-clicks", FORMAT_VERSION, DATA_SEED, spec.shape.rows, spec.shape.multi_hot,
                         spec.train_days, spec.rows_per_day, spec.eval_day_rows)


def prepare(spec: DlrmSpec, force: bool = False) -> tuple[Path, dict]:
    """The tier's day files (built once), and meta.json's record of them."""
    folder = build_once(cache_folder(spec), "meta.json", lambda staging: _build(spec, staging), force)
    try:
        return folder, json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"prepared click log in {folder} is corrupt ({type(e).__name__}); rebuild it with "
                        f"`trainclock data prepare {spec.name} --force`") from None


def _build(spec: DlrmSpec, staging: Path) -> None:
    rng = np.random.default_rng(DATA_SEED)
    model = calibrated(ClickModel.draw(spec.shape.rows, spec.shape.multi_hot, rng), rng)
    rates = []
    for day in range(spec.train_days + 1):
        n = spec.rows_per_day if day < spec.train_days else spec.eval_day_rows
        day_rng = np.random.default_rng([DATA_SEED, day])
        dense, sparse, logit = model.sample(n, day_rng)
        probability = 1 / (1 + np.exp(-(logit + model.offset)))
        labels = (day_rng.random(n) < probability).astype(np.int32)
        write_day(staging, day, dense, labels, sparse)
        rates.append(float(labels.mean()))
    half = (n + 1) // 2  # the validation set: the first half of the eval day
    meta = {"format": FORMAT_VERSION, "data_seed": DATA_SEED, "train_days": spec.train_days,
            "rows_per_day": spec.rows_per_day, "eval_day_rows": spec.eval_day_rows,
            "validation_samples": half, "click_rate": round(float(np.mean(rates)), 4),
            "best_auc": round(best_auc(probability[:half], labels[:half]), 5),
            "rows": list(spec.shape.rows), "multi_hot": list(spec.shape.multi_hot)}
    atomic_write_text(staging / "meta.json", json.dumps(meta, indent=1) + "\n")  # last: marks it complete
