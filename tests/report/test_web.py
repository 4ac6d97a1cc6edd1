"""The served page and its JSON API, through Flask's test client (the browser test loads the
same app in chromium)."""

from __future__ import annotations

import base64
import hashlib
import re
import socket

import pytest

from trainclock import cli
from trainclock.errors import UsageError
from trainclock.report.web import create_app, make_web_server
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


@pytest.mark.parametrize("path, status", [("/", 200), ("/?round=3.0", 200), ("/api/entries", 200),
                                          ("/api/entries?colour=red", 400), ("/nowhere", 404)])
def test_every_response_carries_the_security_headers(client, path, status):
    http, _ = client
    response = http.get(path)
    assert response.status_code == status
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["X-Frame-Options"] == "DENY"
    policy = dict(rule.strip().split(" ", 1) for rule in response.headers["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert policy["img-src"] == "data:" and policy["form-action"] == "'self'" and "script-src" not in policy


def test_the_policy_allows_exactly_the_pages_style_block(client):
    """The one inline <style> is allowed by its hash: the page keeps its look, nothing else may style it."""
    http, _ = client
    response = http.get("/")
    page = response.get_data(as_text=True)
    (style,) = re.findall(r"<style>(.*?)</style>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in response.headers["Content-Security-Policy"]
    assert "border-collapse" in style and "<script" not in page and " style=" not in page


def test_a_busy_port_is_trainclocks_one_line_error(client, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            make_web_server(create_app(client[1]), "127.0.0.1", port)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""  # werkzeug's own message would be here


def test_serve_on_a_busy_port_through_the_cli(db_url, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["serve", "--db", db_url, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainclock: error: cannot listen on 127.0.0.1:{port}") and len(err.strip().splitlines()) == 1
