"""trainclock's own runs in both forms of their files: the first (tokens, one log perplexity eval,
one target without a direction: a real gpt3-tiny run kept in fixtures/) and the current one
(trainclock_progress_unit, one trainclock_target per metric with its direction, evals as dicts).
Plots are labelled from what the files say, and the best value follows each metric's direction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainclock.errors import DataError
from trainclock.report import plots
from trainclock.report.curves import find_metrics, read_curve
from trainclock.report.html import own_run_pictures

FIRST_FORM = Path(__file__).parent / "fixtures" / "gpt3-tiny-v1"


def mllog(key: str, value, time_ms: int = 1, event_type: str = "POINT_IN_TIME", **metadata) -> str:
    record = {"namespace": "", "time_ms": time_ms, "event_type": event_type, "key": key, "value": value,
              "metadata": {"file": "test", "lineno": 1, **metadata}}
    return ":::MLLOG " + json.dumps(record) + "\n"


def write_new_form_run(folder: Path) -> Path:
    """A run in the current form: images, a higher-is-better box mAP and a lower-is-better error."""
    folder.mkdir(parents=True)
    log = [mllog("submission_benchmark", "detect-tiny"), mllog("trainclock_workload", "detect-tiny"),
           mllog("trainclock_progress_unit", "images", per_sample=1),
           mllog("trainclock_target", 0.3, metric="BBOX", direction="higher"),
           mllog("trainclock_target", 0.1, metric="error", direction="lower"),
           mllog("run_start", None, 2, "INTERVAL_START")]
    rows = []
    for step in range(10):
        rows.append({"step": step, "samples": 8 * (step + 1), "units": 8 * (step + 1), "time_s": step + 1.0,
                     "loss": 3.0 - 0.1 * step, "lr": 0.01, "grad_norm": 1.0, "units_per_s": 8.0})
        if step % 3 == 2:
            bbox, error = [0.1, 0.35, 0.32][step // 3], [0.3, 0.05, 0.08][step // 3]
            rows.append({"step": step, "samples": 8 * (step + 1), "units": 8 * (step + 1), "time_s": step + 1.5,
                         "eval": {"BBOX": bbox, "error": error}})
            log.append(mllog("eval_accuracy", {"BBOX": bbox, "error": error}, 3 + step, epoch_num=8 * (step + 1)))
    log.append(mllog("run_stop", None, 20, "INTERVAL_END", status="success"))
    (folder / "result_0.txt").write_text("".join(log))
    path = folder / "result_0.metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_first_form_run_reads_as_tokens_and_lower_is_better_log_perplexity():
    (path,) = find_metrics(FIRST_FORM)
    curve = read_curve(path)
    assert curve.unit == "tokens" and curve.target == 4.955
    (metric,) = curve.metrics
    assert (metric.name, metric.direction, metric.shown) == ("log perplexity", "lower", "validation log perplexity")
    evals = curve.evals["log perplexity"]
    assert [p.units for p in evals] == [131072, 262144, 393216, 524288]
    assert curve.best == {"log perplexity": min(p.value for p in evals)} and curve.best["log perplexity"] < 4.955
    assert curve.trained == 524288 and len(curve.losses) == 128


def test_a_new_form_run_has_its_own_unit_metrics_and_directions(tmp_path):
    curve = read_curve(write_new_form_run(tmp_path / "results" / "box" / "detect-tiny"))
    assert curve.unit == "images" and curve.label == "box/detect-tiny/result_0"
    assert [(m.name, m.direction, m.target) for m in curve.metrics] == [("BBOX", "higher", 0.3), ("error", "lower", 0.1)]
    assert [p.value for p in curve.evals["BBOX"]] == [0.1, 0.35, 0.32]
    assert curve.best == {"BBOX": 0.35, "error": 0.05}  # max where higher is better, min where lower is
    figure = plots.training_curves([curve], "progress")
    loss, bbox, error = figure.axes
    assert bbox.get_xlabel() == error.get_xlabel() == loss.get_xlabel() == "images trained"
    assert bbox.get_ylabel() == "BBOX (higher is better)" and error.get_ylabel() == "error (lower is better)"
    assert [line.get_label() for line in bbox.lines if line.get_linestyle() == "--"] == ["target 0.3"]
    assert [line.get_label() for line in error.lines if line.get_linestyle() == "--"] == ["target 0.1"]
    assert not [line for line in loss.lines if line.get_linestyle() == "--"]  # a loss has no quality target


def test_runs_of_different_kinds_get_plots_of_their_own(tmp_path):
    new = read_curve(write_new_form_run(tmp_path / "results" / "box" / "detect-tiny"))
    old = read_curve(find_metrics(FIRST_FORM)[0])
    groups = plots.curve_groups([old, new])
    assert [(g.unit, g.metric_names) for g in groups] == [("tokens", ("log perplexity",)), ("images", ("BBOX", "error"))]
    pictures = own_run_pictures([old, new])
    assert [p.name for p in pictures] == ["own-runs-0-time", "own-runs-0-progress", "own-runs-1-time",
                                          "own-runs-1-progress"]
    assert all(p.figure is not None for p in pictures)
    assert "vs images" in pictures[3].title and "vs tokens" in pictures[1].title
    (empty,) = own_run_pictures([])
    assert empty.figure is None and "give --runs DIR" in empty.missing


def test_an_eval_that_is_no_number_is_a_one_line_error(tmp_path):
    path = write_new_form_run(tmp_path / "run")
    path.write_text('{"step": 1, "samples": 8, "units": 8, "time_s": 1, "eval": {"BBOX": "high"}}\n')
    with pytest.raises(DataError, match=r"result_0.metrics.jsonl:1: not a trainclock metrics row .*not a finite number"):
        read_curve(path)
