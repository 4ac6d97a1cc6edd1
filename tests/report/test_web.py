"""The served page and its JSON API, through Flask's test client (the browser test loads the
same app in chromium)."""

from __future__ import annotations

import pytest

from trainclock.report.web import create_app
from trainclock.results.db import open_store, read
from trainclock.results.queries import EntryFilter, list_entries

from .helpers import ParsedPage


@pytest.fixture(scope="module")
def client(db_url):
    with open_store(db_url) as store:
        app = create_app(store)
        yield app.test_client(), store


def test_api_entries_match_the_database(client):
    http, store = client
    body = http.get("/api/entries?round=3.0").get_json()
    expected = read(store, lambda s: list_entries(s, EntryFilter(round="3.0")), "test")
    assert [e["id"] for e in body["entries"]] == [r.id for r in expected]
    assert [e["score_minutes"] for e in body["entries"]] == [r.score_minutes for r in expected]
    assert body["filter"] == {"round": "3.0"}
    assert len(http.get("/api/entries").get_json()["entries"]) > len(expected)


def test_filters_change_the_rows_of_the_page(client):
    http, _ = client
    everything = ParsedPage(http.get("/").get_data(as_text=True)).cell_texts("score")
    cloud = ParsedPage(http.get("/?availability=cloud").get_data(as_text=True)).cell_texts("score")
    h100 = ParsedPage(http.get("/?accelerator=h100&benchmark=gpt3").get_data(as_text=True)).cell_texts("score")
    assert 0 < len(cloud) < len(everything)
    assert "10.940" in h100 and "311.945" not in h100


@pytest.mark.parametrize("query, said", [("availability=space", "give cloud or onprem"),
                                         ("colour=red", "unknown filter colour")])
def test_bad_filters_are_a_clear_400(client, query, said):
    http, _ = client
    response = http.get(f"/api/entries?{query}")
    assert response.status_code == 400
    assert said in response.get_json()["error"]


def test_the_server_is_read_only(client):
    http, _ = client
    assert http.post("/api/entries").status_code == 405
    assert http.delete("/").status_code == 405


def test_api_entries_carry_each_benchmarks_unit_and_metrics(client):
    http, _ = client
    entries = http.get("/api/entries").get_json()["entries"]
    bert = next(e for e in entries if e["benchmark"] == "bert")
    gpt3 = next(e for e in entries if e["benchmark"] == "gpt3")
    assert bert["progress_unit"] == "samples" and gpt3["progress_unit"] == "tokens"
    assert [(m["name"], m["direction"]) for m in bert["metrics"]] == [("mlm accuracy", "higher")]
    assert [(m["name"], m["direction"]) for m in gpt3["metrics"]] == [("log perplexity", "lower")]
