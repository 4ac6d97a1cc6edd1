"""`trainclock serve`: the report's views live from the results store, read-only, filtered by
query parameters (benchmark, round, accelerator, availability), and the same entries as JSON at
/api/entries. Pages come from the report's templates, autoescaped."""

from __future__ import annotations

import socket
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, request
from werkzeug.serving import LISTEN_QUEUE, BaseWSGIServer, get_sockaddr, make_server, select_address_family

from trainclock.errors import TrainclockError, UsageError
from trainclock.report.data import StoreView, load_view
from trainclock.report.html import ReportInputs, content_security_policy, own_run_curves, pictures, render_report
from trainclock.report.planner_curve import PlannerCurve
from trainclock.results.db import Store
from trainclock.results.queries import EntryFilter
from trainclock.results.records import CLOUD, ONPREM

FILTERS = ("benchmark", "round", "accelerator", "availability")
# with the Content-Security-Policy: no MIME sniffing, no referrer to other sites, no framing
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
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

    @app.after_request
    def _secure(response: Response) -> Response:
        response.headers.update(SECURITY_HEADERS)
        response.headers["Content-Security-Policy"] = content_security_policy(served=True)
        return response

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
        family = select_address_family(host, port)
        # bound here, not by werkzeug, which prints its own message and exits on a busy port
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as werkzeug: restart despite TIME_WAIT
            sock.bind(get_sockaddr(host, port, family))
            sock.listen(LISTEN_QUEUE)
            server = make_server(host, port, app, threaded=True, fd=sock.fileno())  # werkzeug keeps a duplicate
    except OSError as e:
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}; choose another --port or --host") from None
    # what HTTPServer.server_bind would have set, had werkzeug bound the socket
    server.server_name, server.server_port = host, server.port
    return server
