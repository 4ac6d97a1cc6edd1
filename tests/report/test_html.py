"""The written report: one self-contained HTML file that parses, has every section, the
fixtures' scores, the plots inlined, and names from logs shown as text."""

from __future__ import annotations

import base64

import pytest

from trainclock.report.data import load_view
from trainclock.report.html import ReportInputs, own_run_curves, write_report
from trainclock.report.planner_curve import load_planner_curve
from trainclock.results.db import open_store, read
from trainclock.results.queries import list_entries
from trainclock.workloads.gpt3.spec import get_member

from .conftest import INJECTED
from .helpers import ParsedPage, png_size

SECTIONS = {"leaderboard", "systems", "scaling", "planner", "own-runs"}


def make_report(db_url: str, out, runs_dir=None, plans=()):
    with open_store(db_url) as store:
        view = load_view(store)
        url = store.shown_url
    inputs = ReportInputs(view, url, own_run_curves(view, runs_dir), [load_planner_curve(p) for p in plans])
    return write_report(inputs, out)


@pytest.fixture(scope="module")
def report(db_url, own_runs, planner_curve_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path, written = make_report(db_url, out, own_runs, [planner_curve_file])
    return path, written, path.read_text()


def test_report_has_every_section_and_the_fixture_scores(report, db_url):
    path, _, html = report
    page = ParsedPage(html)
    assert SECTIONS <= page.ids
    scores = page.cell_texts("score")
    assert "10.940" in scores  # CoreWeave, 3,584 H100, v3.0
    assert "311.945" in scores  # Intel Gaudi2, v3.0
    with open_store(db_url) as store:
        rows = read(store, list_entries, "test")
    # the leaderboards come first in the page, in the store's order
    assert scores[:len(rows)] == [f"{r.score_minutes:.3f}" if r.score_minutes is not None else "–" for r in rows]
    # one leaderboard per benchmark and round
    boards = {(a["data-benchmark"], a["data-round"]) for tag, a in page.tags if tag == "table"
              and "leaderboard" in (a.get("class") or "")}
    assert boards == {(r.benchmark, r.round) for r in rows}
    # every entry has its system section
    assert {f"entry-{r.id}" for r in rows} <= page.ids


def test_report_is_self_contained_with_inline_plots(report):
    _, written, html = report
    page = ParsedPage(html)
    images = [a["src"] for tag, a in page.tags if tag == "img"]
    assert len(images) >= 5  # scaling, efficiency, spread, two own-run plots, planner
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert png_size(base64.b64decode(src.split(",", 1)[1]))[0] > 0
    for tag, attributes in page.tags:  # nothing fetched from anywhere
        for name in ("src", "href"):
            value = attributes.get(name) or ""
            assert not value.startswith(("http:", "https:", "//")), (tag, value)
    assert {p.suffix for p in written} == {".png", ".svg"}
    assert {"plot-scaling", "plot-planner-0", "plot-own-runs-0-time", "plot-own-runs-0-progress"} <= page.ids


def test_report_shows_planner_and_own_runs(report):
    _, _, html = report
    page = ParsedPage(html)
    assert "gpt3-175b on h100-sxm" in html
    assert any(text.startswith("cpu-box/gpt3-tiny/result_0") for _, text in page.cells)
    assert f"{get_member('gpt3-tiny').quality[0].threshold:g}" in [text for _, text in page.cells]


def test_a_script_in_a_system_name_is_text(injected_db_url, tmp_path):
    path, _ = make_report(injected_db_url, tmp_path)
    html = path.read_text()
    page = ParsedPage(html)
    assert not [tag for tag, _ in page.tags if tag == "script"]
    assert "&lt;script&gt;window.pwned" in html
    assert INJECTED in page.cell_texts("system")


def test_report_without_runs_or_plans_says_what_to_give(db_url, tmp_path):
    path, _ = make_report(db_url, tmp_path)
    html = path.read_text()
    assert "No planner curve: give --plan FILE.json" in html


def test_leaderboards_say_each_benchmarks_metric_and_its_direction(report, shared_entries):
    _, _, html = report
    page = ParsedPage(html)
    captions = " ".join(html.split("<caption>")[1:])
    assert "quality: validation log perplexity (lower is better)" in captions
    assert "quality: masked-LM accuracy (higher is better)" in captions
    headers = page.cell_texts("best-quality")
    assert "best validation log perplexity (min)" in headers and "best masked-LM accuracy (max)" in headers
    # the bert entry's best is the highest accuracy any of its passed runs reached; gpt3's the lowest perplexity
    for name, pick in (("v3.1/NVIDIA/eos_n8_ngc23.04_pytorch/bert", max),
                       ("v3.0/NVIDIA_CoreWeave/coreweave_hgxh100_n448_ngc23.04_pytorch/gpt3", min)):
        entry = shared_entries[name]
        best = pick(p.value for run in entry.runs if run.passed for p in run.evals)
        assert f"{best:.4g}" in headers, name
