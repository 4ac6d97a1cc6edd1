"""The written report and the served page of a store holding the published entries of rounds 4.0
to 5.1 (tests/review/fixtures): a leaderboard per benchmark and round, the served page filtered
by round, and the official summarizer's score beside trainclock's in every row."""

from __future__ import annotations

import pytest

from review.conftest import later_rounds  # noqa: F401
from trainclock.report.web import create_app
from trainclock.results.db import open_store
from trainclock.results.importer import import_paths

from .helpers import ParsedPage

WITHHELD_41 = "R760x2H100NVL-PCIe-94GB"  # v4.1 ssd: RCP check failed, no scaling.json


@pytest.fixture(scope="module")
def later_url(later_rounds, tmp_path_factory) -> str:  # noqa: F811
    url = f"sqlite:///{tmp_path_factory.mktemp('later-report') / 'results.db'}"
    import_paths(list(later_rounds.values()), url)
    return url


@pytest.fixture(scope="module")
def http(later_url):
    with open_store(later_url) as store:
        yield create_app(store).test_client()


def _boards(page: ParsedPage) -> set[tuple[str, str]]:
    return {(attrs["data-benchmark"], attrs["data-round"]) for tag, attrs in page.tags
            if tag == "table" and "leaderboard" in (attrs.get("class") or "")}


def test_the_served_page_filters_by_round(http):
    everything = _boards(ParsedPage(http.get("/").get_data(as_text=True)))
    assert {round_ for _, round_ in everything} == {"4.0", "4.1", "5.0", "5.1"}
    for round_ in ("4.0", "5.1"):
        shown = _boards(ParsedPage(http.get(f"/?round={round_}").get_data(as_text=True)))
        assert shown == {board for board in everything if board[1] == round_}
    page = ParsedPage(http.get("/").get_data(as_text=True))
    rounds = [attrs.get("value") for tag, attrs in page.tags if tag == "option"]
    assert {"4.0", "4.1", "5.0", "5.1"} <= set(rounds)  # the round filter offers every stored round


def test_each_row_shows_the_summarizers_score_beside_trainclocks(http):
    page = ParsedPage(http.get("/?round=4.1&benchmark=ssd").get_data(as_text=True))
    assert page.cell_texts("score") == ["33.920", "–"]  # the withheld score is listed last
    assert page.cell_texts("summarizer-score") == ["=", "172.839"]
    api = http.get("/api/entries?round=4.1&benchmark=ssd").get_json()["entries"]
    assert [(e["system"], e["score_minutes"], round(e["summarizer_minutes"], 6)) for e in api][1] == (
        WITHHELD_41, None, 172.839311)


def test_the_written_report_shows_both_figures(cli, later_url, tmp_path):
    code, out, err = cli("report", "--db", later_url, "--out", str(tmp_path / "report"))
    assert code == 0, err
    html = (tmp_path / "report" / "trainclock-report.html").read_text()
    page = ParsedPage(html)
    assert "172.839" in page.cell_texts("summarizer-score")
    assert "the official summarizer prints 172.839 minutes" in " ".join(html.split())
