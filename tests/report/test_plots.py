"""Plots drawn from the fixtures are real pictures of the expected size, in PNG and SVG."""

from __future__ import annotations

import pytest

from trainclock.report import plots
from trainclock.report.curves import find_metrics, read_curve
from trainclock.report.data import load_view
from trainclock.report.planner_curve import load_planner_curve
from trainclock.results.db import open_store
from trainclock.workloads.gpt3.spec import get_member

from .helpers import png_size

MIN_PNG_BYTES = 10_000  # a blank 800x450 PNG compresses to a few kB


@pytest.fixture(scope="module")
def view(db_url):
    with open_store(db_url) as store:
        return load_view(store)


def check_png(figure) -> None:
    data = plots.png_bytes(figure)
    assert png_size(data) == plots.PLOT_SIZE_PX
    assert len(data) > MIN_PNG_BYTES


def test_scaling_plot_has_the_h100_family_and_its_efficiency(view):
    families = plots.scaling_families(view.rows, view.runs)
    h100 = families["gpt3: NVIDIA H100-SXM5-80GB"]
    # Eos 512 GPUs (v3.1, one log: no official score) and CoreWeave 3,584 GPUs (v3.0, scored)
    assert [(p.accelerators, p.scored) for p in h100] == [(512, False), (3584, True)]
    assert h100[0].minutes == pytest.approx(58.246867, abs=1e-5)
    assert h100[1].minutes == pytest.approx(10.940417, abs=1e-5)
    expected = (58.246867 / 10.940417) / (3584 / 512)
    assert plots.efficiency(*h100) == pytest.approx(expected, rel=1e-5)
    figure = plots.scaling(view.rows, view.runs)
    check_png(figure)
    assert f"{expected:.0%}" in [t.get_text() for t in figure.axes[0].texts]
    assert "ideal from 512" in [line.get_label() for line in figure.axes[0].lines]
    check_png(plots.scaling_efficiency(view.rows, view.runs))


def test_run_spread_plot(view):
    check_png(plots.run_spread(view.rows, view.runs))


def test_planner_plot_puts_the_measured_h100_entries_beside_the_prediction(view, planner_curve_file):
    curve = load_planner_curve(planner_curve_file)
    measured = curve.measured(view.rows)
    assert sorted(r.accelerators for r in measured) == [512, 3584]
    figure = plots.planner_vs_measured(curve, view.rows, view.runs)
    check_png(figure)
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert len([label for label in labels if label.startswith("measured:")]) == 2


def test_planner_cost_plot(planner_curve_file):
    curve = load_planner_curve(planner_curve_file)
    assert [p.accelerators for p in curve.points] == [512, 3584, 10752]
    assert all(p.cost_per_run > 0 for p in curve.points)
    figure = plots.planner_cost(curve)
    check_png(figure)
    assert [t.get_text() for t in figure.axes[0].texts] == ["512", "3,584", "10,752"]


def test_training_curves_against_time_and_progress(own_runs):
    curves = [read_curve(p) for p in find_metrics(own_runs)]
    target = get_member("gpt3-tiny").quality[0].threshold  # what the logs were written with
    assert len(curves) == 1 and curves[0].target == pytest.approx(target)
    # the log's target names the metric (the first form of the log names none: its benchmark's, log perplexity)
    (metric,) = curves[0].metrics
    assert metric.direction == "lower" and "log perplexity" in metric.shown
    assert curves[0].unit == "tokens"  # the first form of the metrics file counts tokens
    assert len(curves[0].losses) == 40 and len(curves[0].evals[metric.name]) == 4
    for axis in ("time", "progress"):
        figure = plots.training_curves(curves, axis)
        check_png(figure)
        target_lines = [line for line in figure.axes[1].lines if line.get_label() == f"target {target:g}"]
        assert target_lines
        assert figure.axes[1].get_ylabel() == f"{metric.shown} (lower is better)"
        assert figure.axes[1].get_xlabel() == ("time since run start (minutes)" if axis == "time" else "tokens trained")


def test_nothing_to_draw_gives_no_figure():
    assert plots.scaling([], {}) is None
    assert plots.training_curves([], "time") is None
    assert plots.run_spread([], {}) is None


def test_save_figure_writes_png_and_svg(view, tmp_path):
    written = plots.save_figure(plots.scaling(view.rows, view.runs), tmp_path / "scaling")
    assert [p.name for p in written] == ["scaling.png", "scaling.svg"]
    assert png_size(written[0].read_bytes()) == plots.PLOT_SIZE_PX
    svg = written[1].read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and len(svg) > MIN_PNG_BYTES
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind


def test_dollar_signs_in_names_do_not_break_drawing(view):
    from dataclasses import replace

    rows = [replace(r, system="$x_{", accelerator_model=f"{r.accelerator_model} $") for r in view.rows]
    check_png(plots.scaling(rows, view.runs))
    check_png(plots.run_spread(rows, view.runs))


@pytest.mark.parametrize("line, said", [('{"step": 0, "time_s": 1, "loss": 2}', "no 'units'"),
                                        ("not json", "Expecting value")])
def test_a_damaged_metrics_file_is_a_one_line_error(tmp_path, line, said):
    from trainclock.errors import DataError

    path = tmp_path / "result_0.metrics.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DataError, match=f"result_0.metrics.jsonl:1: not a trainclock metrics row .*{said}") as error:
        read_curve(path)
    assert "\n" not in str(error.value)


def test_runs_folder_without_metrics(tmp_path):
    from trainclock.errors import DataError

    with pytest.raises(DataError, match="holds no result_<i>.metrics.jsonl"):
        find_metrics(tmp_path)
