"""Published per-accelerator training rates, recomputed from MLPerf result logs: for each run that
counts, the samples trained to its convergence point over its time-to-train less the time spent
in evaluations, per accelerator of the system; the median over the entry's runs.

  python benchmarks/published_rates.py [TREE ...]
  (default: shared/mlperf-suite/v3.1/Dell, 8 H100, and shared/mlperf-results/v3.1/NVIDIA: BERT on 8 H100,
  GPT-3 on 512)

Samples come from the review's conversion of the logged progress, or, for benchmarks that count
epochs, from the full-size member's cost model (samples per epoch of the official data set)."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from trainclock.review.json_files import accelerator_count
from trainclock.review.run_review import RunReview
from trainclock.review.tree import review_path
from trainclock.workload import registry

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DEFAULT_TREES = (SHARED / "mlperf-suite" / "v3.1" / "Dell", SHARED / "mlperf-results" / "v3.1" / "NVIDIA")


def run_rate(run: RunReview) -> float | None:
    """Samples per second of a run's training (evaluations excluded), or None where unknown."""
    if not run.passed or not run.time_to_train_ms:
        return None
    samples = run.samples_to_converge
    workload = next((w for w in registry.workloads() if w.key == run.benchmark), None)
    cost = workload.cost(workload.full_size) if workload else None
    if samples is None and cost and run.progress_unit == cost.progress_unit and run.converged_at:
        samples = run.converged_at / cost.units_per_sample
    if samples is None:
        return None
    seconds = run.time_to_train_ms / 1000
    evaluating = sum(stop - start for _, start, stop in (run.eval_spans or ()) if stop <= seconds)
    return samples / (seconds - evaluating)


def published_rates(trees: tuple[Path, ...] = DEFAULT_TREES) -> dict[str, list[tuple[float, int, str]]]:
    """Benchmark -> (median samples/s per accelerator, runs used, system) of every entry in the trees."""
    rates: dict[str, list[tuple[float, int, str]]] = {}
    for entry in (e for tree in trees if tree.is_dir() for e in review_path(tree)):
        per_run = [r for run in entry.runs if (r := run_rate(run)) is not None]
        if not per_run:
            continue
        accelerators = accelerator_count(entry.context.system_desc) if entry.context.system_desc else None
        if not accelerators:  # no system description in the tree: nothing to divide by
            continue
        rates.setdefault(entry.benchmark, []).append((statistics.median(per_run) / accelerators, len(per_run),
                                                      f"{entry.context.org}/{entry.context.system} ({accelerators} accelerators)"))
    return rates


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trees", nargs="*", type=Path, default=list(DEFAULT_TREES))
    args = p.parse_args()
    for tree in args.trees:
        if not tree.is_dir():
            sys.exit(f"published_rates: {tree} is not a folder of MLPerf results; pass a result tree")
    for benchmark, rows in sorted(published_rates(tuple(args.trees)).items()):
        for rate, runs, system_name in rows:
            print(f"{benchmark:18} {rate:12,.2f} samples/s per accelerator  (median of {runs} runs, {system_name})")


if __name__ == "__main__":
    main()
