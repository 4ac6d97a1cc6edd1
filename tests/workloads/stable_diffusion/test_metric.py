"""FID through torchmetrics (reference statistics loaded as its real-image sums, features gathered
over ranks) equals the textbook formula; CLIP score is the mean cosine over all ranks' images; the
loop writes one eval_accuracy line per metric when a job asks for it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainclock.workload.base import EvalShard, QualityTarget, TrainJob
from trainclock.workloads.stable_diffusion.metric import fid, fid_direct, score


def test_fid_matches_the_direct_computation():
    rng = np.random.default_rng(0)
    real = rng.normal(0, 1, (400, 6))
    fake = rng.normal(0.3, 1.2, (100, 6))
    mu, sigma = real.mean(0), np.cov(real, rowvar=False)
    assert fid(torch.from_numpy(fake), mu, sigma, len(real)) == pytest.approx(fid_direct(fake, mu, sigma), rel=1e-6)


def test_score_gathers_features_and_sums_cosines_over_ranks():
    rng = np.random.default_rng(1)
    parts = [torch.from_numpy(rng.normal(0, 1, (n, 4))) for n in (30, 20)]
    ref = {"mu": np.zeros(4), "sigma": np.eye(4), "count": np.array(1000)}
    stats = EvalShard(sums={"cosine_sum": torch.tensor(0.2 * 30 + 0.4 * 20, dtype=torch.float64),
                            "images": torch.tensor(50.0, dtype=torch.float64)}, gathered=parts)
    values = score(stats, ref)
    assert values["CLIP"] == pytest.approx(0.28)
    assert values["FID"] == pytest.approx(fid_direct(torch.cat(parts).numpy(), ref["mu"], ref["sigma"]), rel=1e-6)


def test_a_job_can_ask_for_a_line_per_metric():
    quality = (QualityTarget("FID", 90, "lower"), QualityTarget("CLIP", 0.15, "higher"))
    job = TrainJob(*([None] * 8), quality, *([None] * 8), eval_lines="per_metric")
    assert job.eval_accuracy_lines({"FID": 80.0, "CLIP": 0.2}) == [(80.0, {"metric": "FID"}), (0.2, {"metric": "CLIP"})]
    single = TrainJob(*([None] * 8), quality, *([None] * 8))
    assert single.eval_accuracy_lines({"FID": 80.0, "CLIP": 0.2}) == [({"FID": 80.0, "CLIP": 0.2}, {})]


def test_review_joins_a_line_per_metric_into_one_evaluation_and_counts_steps_in_images():
    from trainclock.mllog.progress import ProgressCodec
    from trainclock.mllog.reader import Event
    from trainclock.review.benchmarks import HIGHER, LOWER, Metric
    from trainclock.review.log_summary import EvalPoint
    from trainclock.review.run_review import _converged_at

    own = (Metric("FID", LOWER, None, 90.0), Metric("CLIP", HIGHER, None, 0.15))
    evals = tuple(EvalPoint(step, value, metric, 0, 0) for step, value, metric in
                  [(2, 80.0, "FID"), (2, 0.1, "CLIP"), (4, 95.0, "FID"), (4, 0.2, "CLIP"), (6, 85.0, "FID"),
                   (6, 0.16, "CLIP")])
    assert _converged_at({}, evals, own) == 6  # FID and CLIP meet their targets together first at step 6
    unit = Event(key="trainclock_progress_unit", value="images", metadata={"per_sample": 1, "logged_in": "steps"},
                 event_type="POINT_IN_TIME", time_ms=0, lineno=1)
    assert ProgressCodec.read(unit.value, unit.metadata, 512).units_per_count == 512.0
