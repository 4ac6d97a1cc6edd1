"""`trainclock results import|list|show|compare|migrate`: the results store (SQLite by default,
PostgreSQL by URL). import and migrate write (import creates the store); list, show and compare
only read, and refuse a store that does not exist or needs migrating."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainclock.commands.review import ROUND_HELP

DB_HELP = ("the results database: a SQLite file path or sqlite:///PATH, or postgresql://USER:PASSWORD@HOST:PORT/DB "
           "(default: $TRAINCLOCK_DB, else results.db in the data directory)")


def register(sub) -> None:
    results = sub.add_parser("results", help="the results store: import reviewed logs, list, show and compare entries")
    actions = results.add_subparsers(required=True, metavar="ACTION", dest="action")
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", metavar="URL", help=DB_HELP)
    filters = argparse.ArgumentParser(add_help=False)
    filters.add_argument("--benchmark", help="exactly as stored: an MLPerf key, or a trainclock member "
                                             "(<benchmark>-<size>; see `trainclock list`)")
    filters.add_argument("--round", dest="round_", metavar="ROUND", help="MLPerf round, as X.Y or vX.Y")
    filters.add_argument("--accelerator", help="part of the accelerator's name, any case (h100, gaudi2), or cpu")
    where = filters.add_mutually_exclusive_group()
    where.add_argument("--cloud", dest="availability", action="store_const", const="cloud",
                       help="only systems available in a cloud")
    where.add_argument("--onprem", dest="availability", action="store_const", const="onprem",
                       help="only systems available on premise")

    imp = actions.add_parser("import", parents=[db], help="review logs and keep them: a log, a benchmark folder or a tree")
    imp.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                     help="a result_N.txt, a folder of them, or a tree <org>/results/<system>/<benchmark>/")
    imp.add_argument("--round", dest="round_", metavar="ROUND", help=ROUND_HELP)
    imp.add_argument("--rcp-dir", type=Path, help="reference convergence points (see `trainclock review --help`)")

    actions.add_parser("list", parents=[db, filters], help="the stored entries, fastest first within each benchmark")

    show = actions.add_parser("show", parents=[db], help="one entry: its system, runs, findings and eval curves")
    show.add_argument("entry", metavar="ENTRY", help="an entry id (from `results list`) or part of its org or system name")
    show.add_argument("-v", "--verbose", action="store_true", help="every system field, finding and eval point")

    actions.add_parser("migrate", parents=[db],
                       help="bring an existing store to this trainclock's schema in place, keeping every row "
                            "(imports do it too; list, show, compare, report and serve only read)")

    cmp = actions.add_parser("compare", parents=[db, filters],
                             help="entries side by side per benchmark: score, throughput, speedup, scaling efficiency")
    cmp.add_argument("entries", nargs="*", metavar="ENTRY",
                     help="entry ids or parts of org or system names, two or more entries in all "
                          "(default: every entry the filters leave)")
    results.set_defaults(func=main)


def main(args) -> int:
    return {"import": _import, "list": _list, "show": _show, "compare": _compare, "migrate": _migrate}[args.action](args)


def _import(args) -> int:
    from trainclock.errors import UsageError
    from trainclock.results.importer import import_paths
    from trainclock.results.render import print_import

    if args.rcp_dir is not None and not args.rcp_dir.is_dir():
        raise UsageError(f"--rcp-dir {args.rcp_dir} is not a folder; give one laid out training_<round>/rcps_<benchmark>.json")
    print_import(import_paths(args.paths, args.db, args.round_, args.rcp_dir))
    return 0


def _list(args) -> int:
    from trainclock.results.queries import list_entries
    from trainclock.results.render import print_entries

    print_entries(_read(args, lambda session: list_entries(session, _filter(args)), "listing entries"))
    return 0


def _show(args) -> int:
    from trainclock.results.queries import load_entry
    from trainclock.results.render import print_entry

    print_entry(_read(args, lambda session: load_entry(session, args.entry), "reading an entry"), verbose=args.verbose)
    return 0


def _compare(args) -> int:
    from trainclock.errors import UsageError
    from trainclock.results.compare import compare
    from trainclock.results.queries import best_quality, list_entries, run_stats, select_entries
    from trainclock.results.render import print_comparisons

    def load(session):
        where = _filter(args)
        entries = select_entries(session, args.entries, where) if args.entries else list_entries(session, where)
        ids = [e.id for e in entries]
        return entries, run_stats(session, ids), best_quality(session, ids)

    entries, runs, best = _read(args, load, "comparing entries")
    if args.entries and len(entries) < 2:
        raise UsageError(f"{' '.join(args.entries)!r} names {len(entries)} entry; compare needs two or more: "
                         "add another id or name (`trainclock results list` shows them)")
    if not entries:
        raise UsageError("no stored entry matches; import results with `trainclock results import PATH`, "
                         "or loosen the filters")
    print_comparisons(compare(entries, runs, best))
    return 0


def _migrate(args) -> int:
    from trainclock.results.db import open_store
    from trainclock.results.migrations import latest_version

    with open_store(args.db, create=False) as store:
        found, latest = store.found_version, latest_version()
        if found == latest:
            print(f"trainclock: {store.shown_url} is at schema version {latest} already; nothing to do")
        else:
            print(f"trainclock: {store.shown_url} migrated from schema version {found} to {latest}, every row kept")
    return 0


def _read(args, work, what: str):
    from trainclock.results.db import open_reader, read

    with open_reader(args.db) as store:
        return read(store, work, what)


def _filter(args):
    from trainclock.results.queries import EntryFilter

    return EntryFilter(benchmark=args.benchmark, round=args.round_, accelerator=args.accelerator,
                       availability=args.availability)
