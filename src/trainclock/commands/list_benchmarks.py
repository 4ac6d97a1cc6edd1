"""`trainclock list`: the benchmarks with their shapes and targets."""

from __future__ import annotations


def register(sub) -> None:
    sub.add_parser("list", help="list the benchmarks with their shapes and targets").set_defaults(func=main)


def main(args) -> int:
    from trainclock.report.summary import print_members

    print_members()
    return 0
