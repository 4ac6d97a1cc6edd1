"""`trainclock list`: every benchmark and member with its metric, direction and target."""

from __future__ import annotations


def register(sub) -> None:
    sub.add_parser("list", help="list the benchmarks with their members and targets").set_defaults(func=main)


def main(args) -> int:
    from trainclock.report.summary import print_members
    from trainclock.workloads import registry

    print_members([(w.key, w.title, w.members()) for w in registry.workloads()])
    for package, module in registry.unavailable().items():
        print(f"trainclock: {package} is left out: it needs {module}, which is not installed (./scripts/install.sh)")
    return 0
