"""Prints, for every CPU tier with target evidence, the five points of the tier rule
(trainclock.workload.tier_rule) read from its recorded reference runs, and whether it passes.
The stability limit is twice the largest coefficient of variation (population stdev / olympic
mean of samples-to-converge) among the reference convergence points of the round the benchmark
follows (its mlperf_round), computed from mlperf_logging's RCP files as the review reads them.

  python benchmarks/tier_rule.py [--members resnet-mini,gpt3-mini] [--round 3.1.0]
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

from trainclock.review.rcp import largest_cv
from trainclock.workload import registry
from trainclock.workload.tier_rule import judge


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", help="comma-separated members (default: every one with target evidence)")
    p.add_argument("--round", help="the RCP round whose spread sets the stability limit, e.g. 3.1.0 "
                                   "(default: each benchmark's own)")
    args = p.parse_args()
    wanted = set(args.members.split(",")) if args.members else None
    passing = total = 0
    for workload in registry.workloads():
        folder = Path(inspect.getfile(type(workload))).parent / "targets"
        cv = largest_cv(workload.key, args.round or f"{workload.mlperf_round}.0")
        for member in workload.members():
            path = folder / f"{member.name}.json"
            if not path.is_file() or (wanted is not None and member.name not in wanted):
                continue
            evidence = json.loads(path.read_text())
            runs = evidence.get("runs") or []
            if not runs:
                print(f"{member.name}: no reference runs recorded")
                continue
            points = judge(runs, member.quality, cv)
            ok = all(pt.passed for pt in points)
            total += 1
            passing += ok
            targets = ", ".join(t.describe() for t in member.quality)
            print(f"{member.name} ({targets}; {len(runs)} seeds; {workload.key} RCP CV {cv:.3f}): "
                  f"{'PASSES' if ok else 'fails'}")
            for pt in points:
                print(f"  {'ok  ' if pt.passed else 'FAIL'} {pt.name}: {pt.shown}")
    print(f"{passing} of {total} tiers pass every point of the rule")


if __name__ == "__main__":
    main()
