"""`trainclock serve`: the report's views live from the results store, read-only, filtered by
query parameters (benchmark, round, accelerator, availability), and the same entries as JSON at
/api/entries. Pages come from the report's templates, autoescaped."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, request
from werkzeug.serving import BaseWSGIServer, make_server

from trainclock.errors import TrainclockError, UsageError
from trainclock.report.data import StoreView, load_view
from trainclock.report.html import ReportInputs, own_run_curves, pictures, render_report
from trainclock.report.planner_curve import PlannerCurve
from trainclock.results.db import Store
from trainclock.results.queries import EntryFilter
from trainclock.results.records import CLOUD, ONPREM

FILTERS = ("benchmark", "round", "accelerator", "availability")
# matplotlib's font and text caches are not thread-safe: the server draws one page at a time
_DRAWING = threading.Lock()


@dataclass(frozen=True)
class FilterOptions:
    benchmarks: list[str]
    rounds: list[str]
    accelerators: list[str]
    availabilities: list[str]


def create_app(store: Store, runs_dir: Path | None = None, planner_curves: list[PlannerCurve] | None = None) -> Flask:
    app = Flask("trainclock.report.web")

    @app.errorhandler(TrainclockError)
    def _bad_request(error: TrainclockError) -> tuple[Response, int]:
        return jsonify(error=str(error)), 400

    @app.get("/")
    def index() -> str:
        where = request_filter()
        view = load_view(store, where)
        everything = load_view(store)
        inputs = ReportInputs(view, store.shown_url, own_run_curves(view, runs_dir), planner_curves or [])
        with _DRAWING:
            return render_report(inputs, pictures(inputs), "page.html.j2", "live", options=filter_options(everything),
                                 chosen={name: request.args.get(name, "") for name in FILTERS},
                                 query=urlencode({k: v for k, v in request.args.items() if k in FILTERS and v}))

    @app.get("/api/entries")
    def entries() -> Response:
        view = load_view(store, request_filter())
        return jsonify(filter={k: v for k, v in asdict(view.where).items() if v},
                       entries=[asdict(row) for row in view.rows])

    return app


def request_filter() -> EntryFilter:
    """The entry filter of the query string; an empty parameter means no filter."""
    unknown = sorted(set(request.args) - set(FILTERS))
    if unknown:
        raise UsageError(f"unknown filter {', '.join(unknown)}; the filters are {', '.join(FILTERS)}")
    given = {name: request.args.get(name) or None for name in FILTERS}
    if given["availability"] not in (None, CLOUD, ONPREM):
        raise UsageError(f"availability={given['availability']!r}: give {CLOUD} or {ONPREM}")
    return EntryFilter(**given)


def filter_options(view: StoreView) -> FilterOptions:
    rows = view.rows
    return FilterOptions(sorted({r.benchmark for r in rows}), sorted({r.round for r in rows}),
                         sorted({r.accelerator_model for r in rows if r.accelerator_model}),
                         sorted({r.availability for r in rows if r.availability}))


def make_web_server(app: Flask, host: str, port: int) -> BaseWSGIServer:
    """A threaded WSGI server bound now (port 0: a free one, read it from .server_port)."""
    try:
        return make_server(host, port, app, threaded=True)
    except OSError as e:
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}; choose another --port") from None
