"""`trainclock review PATH`: check MLPerf logs against the rules and score them as MLPerf does."""

from __future__ import annotations

from pathlib import Path

ROUND_HELP = ("MLPerf Training rules to apply, as X.Y: any round trainclock's scoring facts cover whose rules the installed "
              "mlperf-logging ships (default: from a vX.Y or training_results_vX.Y folder in the path, else told "
              "from the logs; a round that cannot be told is an error)")


def register(sub) -> None:
    review = sub.add_parser("review", help="check and score MLPerf logs: one log, a benchmark folder or a result tree")
    review.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                        help="a result_N.txt, a folder of them, or a tree <org>/results/<system>/<benchmark>/")
    review.add_argument("--round", dest="round_", metavar="ROUND", help=ROUND_HELP)
    review.add_argument("--rcp-dir", type=Path,
                        help="reference convergence points, laid out training_<round>/rcps_<benchmark>.json "
                             "(default: those of the mlperf-logging package)")
    review.add_argument("-v", "--verbose", action="store_true", help="every finding and warning, and each run's convergence")
    review.add_argument("--json", action="store_true",
                        help="print the review as JSON: per entry the verdict, the official score, what the result "
                             "summarizer would print, the RCP check and every run")
    review.set_defaults(func=main)


def main(args) -> int:
    from trainclock.errors import UsageError
    from trainclock.review.tree import review_path

    if args.rcp_dir is not None and not args.rcp_dir.is_dir():
        raise UsageError(f"--rcp-dir {args.rcp_dir} is not a folder; give one laid out training_<round>/rcps_<benchmark>.json")
    entries = [entry for path in args.paths for entry in review_path(path, args.round_, args.rcp_dir)]
    if getattr(args, "json", False):
        import sys

        from trainclock.review.as_json import review_as_json

        sys.stdout.write(review_as_json(entries) + "\n")
    else:
        from trainclock.review.render import print_review

        print_review(entries, verbose=args.verbose)
    return 0 if all(entry.ok for entry in entries) else 1
