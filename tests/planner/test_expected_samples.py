"""Samples to train without rounding twice (the RCP means are already over runs that each stopped at
an evaluation), a re-run prediction kept at its samples, and the batch an entry is planned with where
nothing records it (issue 38). Expectations worked by hand in the comments."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from trainclock.planner.calibration import published_scores
from trainclock.planner.model.convergence import ConvergenceModel, eval_interval_samples
from trainclock.planner.model.predict import predict
from trainclock.planner.model.published_layouts import published_layout
from trainclock.planner.model.step_time import Efficiency
from trainclock.planner.model.workload_view import cost_model

from .helpers import accelerator, plan

SUITE = (Path(__file__).resolve().parents[2] / ".." / "shared" / "mlperf-suite").resolve()


def _model(points, units_per_sample=1.0, unit="samples") -> ConvergenceModel:
    return ConvergenceModel("made-up", tuple(points), "by hand", unit, units_per_sample)


def test_expected_samples_are_the_mean_in_whole_steps_not_rounded_to_an_evaluation_again():
    m = _model([(10, 415.0), (20, 435.0)])
    # batch 10: 415 samples = 41.5 steps -> 42 steps = 420 (not 500, the next evaluation of every 100)
    assert m.expected_samples(10) == 420
    assert m.samples_to_target(10, 100) == 500
    # batch 15: halfway, 425 samples = 28.33 steps -> 29 steps = 435
    assert m.expected_samples(15) == 435
    # batch 20: 435 = 21.75 steps -> 22 steps = 440
    assert m.expected_samples(20) == 440
    # a whole number of steps stays as it is
    assert _model([(20, 440.0)]).expected_samples(20) == 440


def test_predict_trains_the_expected_samples_and_keeps_given_samples_as_they_are():
    cost = cost_model("gpt3-125m")  # 2,048 tokens a sample, an evaluation every 24,576 samples
    assert cost.units_per_sample == 2048 and eval_interval_samples(cost, 256) == 24576
    # 100.5 steps of 256 to the target: 25,728 samples
    convergence = _model([(256, 2048 * 256 * 100.5)], units_per_sample=2048, unit="tokens")
    args = (cost, accelerator(), 256, plan(dp=8), Efficiency(0.4))
    planned = predict(*args, convergence=convergence)
    # 101 whole steps = 25,856 samples, one evaluation (25,856 / 24,576 = 1.05 rounds to 1); rounded up
    # to an evaluation again it would be 2 x 24,576 = 49,152
    assert (planned.samples, planned.steps, planned.evaluations) == (25856, 101, 1)
    again = predict(*args, samples=planned.samples)
    assert (again.samples, again.steps, again.evaluations) == (25856, 101, 1)
    assert again.samples_source == "as planned"
    assert again.time_to_train_s == pytest.approx(planned.time_to_train_s)
    # --tokens still rounds up to an evaluation: 25,728 samples -> 49,152
    assert predict(*args, units=25728 * 2048).samples == 49152


def test_the_nearest_published_scale_is_by_ratio_the_smaller_on_a_tie():
    # resnet on h100-sxm is published at 8, 64 and 3,584 GPUs
    assert published_scores.nearest_published("resnet", "h100-sxm", 4).count == 8
    assert published_scores.nearest_published("resnet", "h100-sxm", 16).count == 8  # 2x vs 4x
    assert published_scores.nearest_published("resnet", "h100-sxm", 32).count == 64  # 4x vs 2x
    assert published_scores.nearest_published("resnet", "no-such-card", 8) is None


def _ranked(*batch_and_seconds):
    return [SimpleNamespace(global_batch_size=b, time_to_train_s=s) for b, s in batch_and_seconds]


def test_an_unknown_batch_among_near_ties_is_the_one_nearest_the_published_batch():
    nearest = published_layout("resnet", "h100-sxm", 8)  # global batch 3,200
    # 1,632 and 3,264 within 1% (100.0 vs 100.5 s): the model cannot tell them; 3,264 is nearer 3,200
    chosen, source = published_scores._unknown_batch(_ranked((1632, 100.0), (3264, 100.5), (6528, 150.0)), nearest)
    assert chosen.global_batch_size == 3264
    assert source.startswith("searched, batch 3,264 as near 3,200 (8 x, config_DGXH100.sh)")
    # 2% apart: the model does tell them, and the fastest stays
    chosen, source = published_scores._unknown_batch(_ranked((1632, 100.0), (3264, 102.0)), nearest)
    assert (chosen.global_batch_size, source) == (1632, published_scores.SEARCHED)
    # no published layout on the accelerator: the fastest
    chosen, source = published_scores._unknown_batch(_ranked((1632, 100.0), (3264, 100.5)), None)
    assert (chosen.global_batch_size, source) == (1632, published_scores.SEARCHED)


def test_suite_entries_of_unknown_batch_take_the_published_batch_only_on_a_near_tie(catalogue, mlperf_dir):
    suite = published_scores.load_suite(SUITE, catalogue, lambda: mlperf_dir, only="resnet")
    h100 = {e.row.key: e for e in suite.benchmarks["resnet"].groups["h100-sxm"]}
    # 4 H100 (no config, no log): 1,632 (35.0 epochs) and 3,264 (35.2) predict within 0.1%
    four = h100["Dell/XE8640x4H100-SXM-80GB"]
    assert four.prediction.global_batch_size == 3264 and "as near 3,200" in four.layout_source
    # an accelerator with no published layout keeps the search's batch
    a100 = suite.benchmarks["resnet"].groups["a100-pcie-80gb"]
    assert all(e.layout_source == published_scores.SEARCHED for e in a100)
