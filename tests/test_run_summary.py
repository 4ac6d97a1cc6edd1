"""The table a finished run prints: several targets are judged together, at one evaluation."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from trainclock.train.loop import TrainOutcome
from trainclock.train.run import RunResult
from trainclock.train.summary import print_run_summary
from trainclock.workload.base import QualityTarget

FID = QualityTarget(metric="FID", threshold=2432.1, direction="lower")
CLIP = QualityTarget(metric="CLIP", threshold=0.229, direction="higher")


def summary(status: str, evals: list[tuple[int, dict[str, float]]], targets: tuple[QualityTarget, ...],
            reached_samples: int | None = None) -> str:
    outcome = TrainOutcome(status, 200, 3200, 3200, 17.0, evals, 0.1, False, reached_samples=reached_samples)
    result = RunResult(Path("r.txt"), Path("m.jsonl"), Path("s.json"), outcome, 22100, "images", 188.0, targets,
                       206, 0.0, 1.0, 1)
    console = Console(record=True, width=200)
    print_run_summary(result, console)
    return console.export_text()


def test_an_aborted_run_with_two_targets_shows_one_evaluation_not_each_metrics_best():
    # sd-tiny seed 206: FID met only at the last evaluation, CLIP only at earlier ones; each
    # metric's best of the run (2310.7 and 0.2584) would read as both targets met
    evals = [(2000, {"FID": 2499.5, "CLIP": 0.2584}), (2800, {"FID": 2435.7, "CLIP": 0.2463}),
             (3200, {"FID": 2310.7, "CLIP": 0.2261})]
    text = summary("aborted", evals, (FID, CLIP))
    assert "2310.7000 FID (target FID <= 2432.1, at the last evaluation)" in text
    assert "0.2261 CLIP (target CLIP >= 0.229, at the last evaluation)" in text
    assert "0.2584" not in text


def test_a_successful_run_shows_the_evaluation_that_met_the_targets():
    evals = [(2000, {"FID": 2499.5, "CLIP": 0.2584}), (3200, {"FID": 2400.0, "CLIP": 0.2301})]
    text = summary("success", evals, (FID, CLIP))
    assert "2400.0000 FID (target FID <= 2432.1)" in text and "0.2301 CLIP (target CLIP >= 0.229)" in text


def test_an_aborted_run_with_one_target_shows_its_best():
    evals = [(2000, {"FID": 2400.0}), (3200, {"FID": 2450.0})]
    text = summary("aborted", evals, (QualityTarget("FID", 2300.0, "lower"),))
    assert "2400.0000 FID (target FID <= 2300, best of the run)" in text


def test_an_offline_run_counts_to_the_model_that_met_the_target_not_to_its_limit():
    # sd-tiny seed 11: its snapshot at 6,400 images met both targets; training had gone on to 8,960
    evals = [(2000, {"FID": 2499.5, "CLIP": 0.2584}), (2400, {"FID": 2400.0, "CLIP": 0.2301})]
    text = summary("success", evals, (FID, CLIP), reached_samples=2400)
    assert "images to target │ 2,400 (2,400 samples, 150 steps; trained on to 3,200)" in text
    assert "3,200 (3,200 samples" not in text
