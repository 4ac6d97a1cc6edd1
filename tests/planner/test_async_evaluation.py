"""Asynchronous evaluation (issue 38): an evaluation that stops training only for its forward passes
while its scoring (COCO's, on the host) runs beside the next interval's training. The log says
which part is which (training resumes before eval_stop); the prediction charges every evaluation's
blocking part and only the last one's scoring, whose result stops the run. Worked by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from trainclock.planner.calibration import published_scores
from trainclock.planner.model.hardware import load_catalogue
from trainclock.planner.model.parallel_plan import complete
from trainclock.planner.model.predict import predict
from trainclock.planner.model.step_time import Efficiency, eval_seconds
from trainclock.planner.model.workload_view import cost_model


def _log(path, events):
    lines = [":::MLLOG " + json.dumps({"namespace": "", "time_ms": int(t * 1000), "event_type": "POINT_IN_TIME",
                                       "key": key, "value": None, "metadata": {}}) for t, key in events]
    path.write_text("\n".join(lines) + "\n")


def test_a_log_splits_an_evaluation_at_the_resumption_of_training(tmp_path):
    # run 1: evaluation 1 stops training 4 s (resumes at 104) and reports 16 s later; evaluation 2
    # stops it 3 s and reports 12 s later, which also stops the run
    _log(tmp_path / "result_0.txt", [(0, "run_start"), (0, "block_start"), (100, "block_stop"), (100, "eval_start"),
                                    (104, "block_start"), (120, "eval_stop"), (200, "block_stop"),
                                    (200, "eval_start"), (203, "epoch_start"), (215, "eval_stop"), (215, "run_stop")])
    # run 2: a synchronous evaluation (training waits for eval_stop): all of it blocks
    _log(tmp_path / "result_1.txt", [(0, "run_start"), (50, "eval_start"), (56, "eval_stop"), (56, "block_start"),
                                    (90, "run_stop")])
    timing = published_scores.eval_timing(tmp_path, "x/y", 8)
    assert timing.evaluations == 3
    assert timing.mean_eval_s == pytest.approx((20 + 15 + 6) / 3)
    assert timing.blocking_s == pytest.approx((4 + 3 + 6) / 3)  # what the step-time model fits
    assert timing.async_s == pytest.approx((16 + 12) / 2)  # over the asynchronous evaluations only
    assert timing.stopping_s == timing.blocking_s


def test_a_synchronous_log_has_no_scoring_beside_training(tmp_path):
    _log(tmp_path / "result_0.txt", [(0, "run_start"), (10, "eval_start"), (12, "eval_stop"), (12, "block_start"),
                                    (30, "eval_start"), (33, "eval_stop"), (33, "run_stop")])
    timing = published_scores.eval_timing(tmp_path, "x/y", 8)
    assert (timing.mean_eval_s, timing.blocking_s, timing.async_s) == (pytest.approx(2.5), pytest.approx(2.5), 0.0)


def test_only_the_last_evaluations_scoring_is_on_the_clock():
    cost = cost_model("maskrcnn")
    h100 = load_catalogue()["h100-sxm"]
    plan = complete(published_scores.template(h100), {"tp": 1, "pp": 1, "micro_batch": 4, "zero": 0}, 64)
    synchronous = predict(cost, h100, 256, plan, Efficiency(0.3, eval_overhead_s=1.0), units=17.1)
    scoring = predict(cost, h100, 256, plan, Efficiency(0.3, eval_overhead_s=1.0, eval_async_s=15.0), units=17.1)
    assert synchronous.evaluations == scoring.evaluations == 18  # 17.1 epochs: the 18th evaluation reaches it
    assert scoring.eval_s == synchronous.eval_s  # the blocking part: forward passes plus 1 s
    # 18 blocking evaluations as before, then 15 s of the last one's scoring; the 17 others scored
    # while the next epoch trained
    assert scoring.evals_s == pytest.approx(18 * synchronous.eval_s + 15.0)
    assert scoring.time_to_train_s - synchronous.time_to_train_s == pytest.approx(15.0)
    assert scoring.eval_async_exposed_s == 15.0 and synchronous.eval_async_exposed_s == 0.0


def test_the_fit_charges_the_blocking_part_and_carries_the_scoring_as_measured():
    timing = published_scores.EvalTiming("x/y", 8, mean_eval_s=19.0, evaluations=14, blocking_s=4.0, async_s=15.0)
    bench = published_scores.Benchmark("maskrcnn", cost_model("maskrcnn"), convergence=None, timing=timing)
    h100 = load_catalogue()["h100-sxm"]
    plan = complete(published_scores.template(h100), {"tp": 1, "pp": 1, "micro_batch": 12, "zero": 0}, 8)
    prediction = predict(bench.cost, h100, 96, plan, Efficiency(0.3), units=14.0)
    minutes = prediction.time_to_train_s / 60
    row = published_scores.ScoreRow("maskrcnn", "closed", "x", "y", "H100", 8, minutes)
    entry = published_scores.Entry(row, h100, prediction)
    bench.groups["h100-sxm"] = [entry, replace(entry, row=replace(row, system="z"))]
    bench.timing_accelerator, bench.timing_entry = "h100-sxm", entry
    fit = published_scores.fit_group(bench, "h100-sxm").efficiency
    assert fit.eval_async_s == 15.0
    # the evaluation the step-time model fits is the 4 s that stop training, not the 19 s to eval_stop
    assert eval_seconds(bench.cost, plan, h100, fit) == pytest.approx(4.0, rel=0.02)
