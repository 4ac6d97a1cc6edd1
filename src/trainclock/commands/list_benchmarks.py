"""`trainclock list`: every benchmark and member with its metric, direction and target."""

from __future__ import annotations


def register(sub) -> None:
    parser = sub.add_parser("list", help="list the benchmarks with their members and targets")
    parser.add_argument("--names", action="store_true", help="only the member names, one a line (for scripts)")
    parser.set_defaults(func=main)


def main(args) -> int:
    from trainclock.report.summary import print_members
    from trainclock.workload import registry

    if args.names:
        for workload in registry.workloads():
            for member in workload.members():
                print(member.name)
        return 0
    print_members([(w.key, w.title, w.members()) for w in registry.workloads()])
    for package, module in registry.unavailable().items():
        print(f"trainclock: {package} is left out: it needs {module}, which is not installed (./scripts/install.sh)")
    return 0
