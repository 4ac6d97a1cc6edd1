"""`trainclock serve`: the results store as a live, read-only web page with filters and a JSON API."""

from __future__ import annotations

from pathlib import Path

from trainclock.commands.results import DB_HELP

DEFAULT_PORT = 8050


def register(sub) -> None:
    serve = sub.add_parser("serve", help="serve the results as a web page (filters, plots) and JSON at /api/entries")
    serve.add_argument("--db", metavar="URL", help=DB_HELP)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: %(default)s, this machine only)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default: %(default)s; 0 picks a free one)")
    serve.add_argument("--runs", type=Path, metavar="DIR", help="trainclock output folder whose runs to plot")
    serve.add_argument("--plan", type=Path, action="append", default=[], metavar="FILE.json",
                       help="a planner curve saved by `trainclock plan ... --sweep ... --save FILE.json` (repeatable)")
    serve.set_defaults(func=main)


def main(args) -> int:
    from trainclock.errors import UsageError
    from trainclock.report.curves import find_metrics
    from trainclock.report.planner_curve import load_planner_curve
    from trainclock.report.web import create_app, make_web_server
    from trainclock.results.db import open_reader

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: give a port from 1 to 65535 (0 picks a free one)")
    if args.runs is not None:
        find_metrics(args.runs)  # a wrong folder fails now, not at the first page
    curves = [load_planner_curve(path) for path in args.plan]
    with open_reader(args.db) as store:
        server = make_web_server(create_app(store, args.runs, curves), args.host, args.port)
        print(f"trainclock: serving {store.shown_url} at http://{args.host}:{server.server_port}/ "
              "(JSON at /api/entries; Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0
