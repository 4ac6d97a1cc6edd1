"""`trainclock report`: one self-contained HTML report of the results store (leaderboards,
systems, scaling, planner curves, trainclock's own runs), with its plots as PNG and SVG."""

from __future__ import annotations

from pathlib import Path

from trainclock.commands.results import DB_HELP


def register(sub) -> None:
    report = sub.add_parser("report", help="write an HTML report of the results store, with plots (PNG and SVG)")
    report.add_argument("--db", metavar="URL", help=DB_HELP)
    report.add_argument("--out", type=Path, default=Path("trainclock-report"), metavar="DIR",
                        help="folder for the report and its plots (default: %(default)s)")
    report.add_argument("--runs", type=Path, metavar="DIR",
                        help="trainclock output folder (the --out of `trainclock run`) whose runs to plot")
    report.add_argument("--plan", type=Path, action="append", default=[], metavar="FILE.json",
                        help="a planner curve saved by `trainclock plan ... --sweep ... --save FILE.json` (repeatable)")
    report.set_defaults(func=main)


def main(args) -> int:
    from trainclock.report.data import load_view
    from trainclock.report.html import ReportInputs, own_run_curves, write_report
    from trainclock.report.planner_curve import load_planner_curve
    from trainclock.results.db import open_reader

    curves = [load_planner_curve(path) for path in args.plan]  # a bad file fails before any work
    with open_reader(args.db) as store:
        view = load_view(store)
        db_url = store.shown_url
    inputs = ReportInputs(view, db_url, own_run_curves(view, args.runs), curves)
    report, plots = write_report(inputs, args.out)
    print(f"trainclock: report written to {report} ({len(view.rows)} entries, {len(plots)} plot files beside it)")
    return 0
