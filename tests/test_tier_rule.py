"""The tier rule (trainclock.workload.tier_rule) on made-up reference curves whose answer is
known: a clean tier passes every point, and each way of failing fails its own point."""

from __future__ import annotations

import math

import pytest

from trainclock.workload.base import QualityTarget
from trainclock.workload.tier_rule import crossing, curves, judge, noise

ACCURACY = QualityTarget("accuracy", 0.8, "higher")


def saturating_runs(rates: list[float], evals: int = 12, wobble: float = 0.0, target: QualityTarget = ACCURACY,
                    start: float = 0.1, plateau: float = 0.9) -> list[dict]:
    """One run per rate: value(units) = plateau - (plateau - start) exp(-rate x eval index), one
    evaluation per 100 units, a deterministic +-wobble on alternate evaluations."""
    runs = []
    for rate in rates:
        rows = []
        for i in range(evals):
            value = plateau - (plateau - start) * math.exp(-rate * i) + (wobble if i % 2 else -wobble)
            rows.append([float(i), 100 * (i + 1), 100 * (i + 1), {target.metric: value}])
        runs.append({"evals": rows})
    return runs


def by_name(points):
    return {p.name: p.passed for p in points}


def test_a_clean_tier_passes_every_point():
    points = judge(saturating_runs([0.40, 0.41, 0.42, 0.43, 0.44]), [ACCURACY], rcp_cv=0.05)
    assert all(p.passed for p in points), points


def test_each_failure_fails_its_own_point():
    few = by_name(judge(saturating_runs([0.40, 0.42, 0.44]), [ACCURACY], rcp_cv=0.05))
    assert not few["seeds"] and few["stable"]
    # the budget ends while the curve still climbs steeply
    rising = by_name(judge(saturating_runs([0.05, 0.052, 0.054, 0.056, 0.058], evals=12, plateau=3.0), [ACCURACY], 0.05))
    assert not rising["flat at the end"]
    # seeds that learn at very different speeds
    spread = by_name(judge(saturating_runs([0.2, 0.3, 0.5, 0.8, 1.2]), [ACCURACY], rcp_cv=0.05))
    assert not spread["stable"] and spread["flat at the end"]
    # a target met at the first evaluation
    early = by_name(judge(saturating_runs([0.4] * 5), [QualityTarget("accuracy", 0.05, "higher")], 0.05))
    assert not early["not at the start"] and not early["learning share"]
    # evaluation noise as large as the climb
    noisy = by_name(judge(saturating_runs([0.40, 0.41, 0.42, 0.43, 0.44], wobble=0.08), [ACCURACY], 0.05))
    assert not noisy["no noise crossings"]


def test_the_crossing_is_interpolated_between_evaluations():
    curve = [(100.0, {"accuracy": 0.5}), (200.0, {"accuracy": 0.7}), (300.0, {"accuracy": 0.9})]
    assert crossing(curve, [ACCURACY]) == (2, pytest.approx(250.0))
    loss = QualityTarget("loss", 2.0, "lower")
    assert crossing([(10.0, {"loss": 3.0}), (20.0, {"loss": 1.0})], [loss]) == (1, pytest.approx(15.0))
    assert crossing([(10.0, {"loss": 3.0})], [loss]) is None


def test_evidence_rows_read_as_units_and_metrics():
    assert curves([{"evals": [[1.0, 64, 640, {"accuracy": 0.3}]]}]) == [[(640.0, {"accuracy": 0.3})]]


def test_noise_of_a_straight_line_is_zero_and_of_alternation_is_its_size():
    assert noise([1.0, 2.0, 3.0, 4.0]) == pytest.approx(0.0)
    # +-s around a line: second differences are +-4s, so the estimate is 4s / sqrt(6)
    assert noise([0.1, -0.1, 0.1, -0.1, 0.1]) == pytest.approx(0.4 / math.sqrt(6))


def test_the_learning_share_and_cv_are_given_as_numbers():
    """What the README's tier rows print: the smallest learning share and the CV, as judged."""
    runs = saturating_runs([0.40, 0.41, 0.42, 0.43, 0.44])
    values = {p.name: p.value for p in judge(runs, [ACCURACY], rcp_cv=0.05) if p.value is not None}
    start, plateau = 0.1, max(r["evals"][-1][3]["accuracy"] for r in runs)
    assert values["learning share"] == pytest.approx((0.8 - start) / (plateau - start), rel=0.01)
    assert 0 < values["stable"] < 0.1  # rates within 10%: crossings within about as much


def test_a_share_target_sits_that_far_from_start_to_plateau():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from reference_targets import share_targets

    runs = saturating_runs([0.40, 0.41, 0.42, 0.43, 0.44])
    target = share_targets(runs, (ACCURACY,), 0.85)["accuracy"]
    point = {p.name: p for p in judge(runs, [QualityTarget("accuracy", target, "higher")], rcp_cv=0.05)}
    assert point["learning share"].value == pytest.approx(0.85, abs=0.01)  # rounded to 3 decimals, easier side
    assert point["learning share"].value <= 0.85


def test_most_share_moves_only_a_target_past_it_back():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from reference_targets import capped_targets

    loss = QualityTarget("loss", 2.0, "lower")
    runs = saturating_runs([0.40, 0.41, 0.42, 0.43, 0.44])  # accuracy 0.1 -> about 0.9
    for run in runs:  # a loss from 5 down to about 1 beside it
        for row in run["evals"]:
            row[3]["loss"] = 5.0 - 5.0 * (row[3]["accuracy"] - 0.1)
    got = capped_targets(runs, (ACCURACY, loss), {"accuracy": 0.5, "loss": 1.1}, 0.8)
    point = {p.name: p for p in judge(runs, [QualityTarget("accuracy", got["accuracy"], "higher"),
                                           QualityTarget("loss", got["loss"], "lower")], rcp_cv=0.05)}
    assert got["accuracy"] == 0.5  # half way: kept
    assert 1.1 < got["loss"] < 2.0  # near the plateau: moved back to 0.8 of the way (the easier side)
    assert point["learning share"].shown.startswith("accuracy 0.50, loss 0.80")


def test_mlperf_reference_runs_spread_as_the_issue_reads_them():
    from trainclock.review.rcp import largest_cv

    assert largest_cv("gpt3", "3.1.0") == pytest.approx(0.038, abs=0.0005)
    assert largest_cv("resnet", "3.1.0") == pytest.approx(0.031, abs=0.0005)
    assert largest_cv("no_such_benchmark", "3.1.0") is None
