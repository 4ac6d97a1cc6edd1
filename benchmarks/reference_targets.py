"""Measures a CPU member's quality target from reference runs and records the evidence.

Each seed trains with no target for --budget-tokens tokens; the target is the worst (highest)
best validation log perplexity any seed reached within that budget, so every reference seed
reaches it. The budget is in tokens, not seconds, so the target does not depend on how busy the
machine was; pick it as the tokens this machine trains in the time you want (gpt3-mini: about
500k tokens, 2 minutes at 4,000 tokens/s). Training does not depend on the target, so each
seed's time-to-target is read off its own eval curve (and is only as quiet as the machine was).

  python benchmarks/reference_targets.py gpt3-mini --seeds 1,2,3,4,5 --budget-tokens 491520 --write
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.mllog.reader import read_events
from trainclock.storage import atomic_write_text
from trainclock.device import system
from trainclock.train.loop import TrainOptions
from trainclock.train.run import RunRequest, execute
from trainclock.workloads.base import RunSettings
from trainclock.workloads.gpt3 import WORKLOAD
from trainclock.workloads.gpt3.spec import get_member

TARGETS = Path(__import__("trainclock.workloads.gpt3", fromlist=["x"]).__file__).parent / "targets"


def reference_run(name: str, seed: int, budget_tokens: int, out: Path) -> dict:
    spec = replace(get_member(name), target_log_perplexity=0.0)  # never reached: the full curve
    device = torch.device("cpu")
    options = TrainOptions(device=device, max_samples=budget_tokens // spec.seq_len)
    request = RunRequest(workload=WORKLOAD, spec=spec, settings=RunSettings(), out=out, seed=seed, options=options,
                         progress=False)
    result = execute(request)
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    precision = next(e.value for e in read_events(result.log_path)[0] if e.key == "trainclock_precision")
    evals = [(r["time_s"], r["units"], next(iter(r["eval"].values()))) for r in records if "eval" in r]
    return {"seed": seed, "precision": precision, "evals": evals, "tokens_per_s": round(result.units_per_s), "mfu": round(result.mfu, 4),
            "final_train_loss": round(result.outcome.final_loss, 4)}


def time_to(target: float, evals: list) -> float | None:
    return next((t for t, _, metric in evals if metric <= target), None)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("member")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--budget-tokens", type=int, required=True, help="tokens within which every seed must reach the target")
    p.add_argument("--write", action="store_true", help="write targets/<member>.json")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as out:
        runs = [reference_run(args.member, seed, args.budget_tokens, Path(out)) for seed in seeds]
    best_in_budget = [min(m for _, tokens, m in r["evals"] if tokens <= args.budget_tokens) for r in runs]
    target = round(max(best_in_budget) + 0.0005, 3)  # round up: every seed stays within the budget
    times = [time_to(target, r["evals"]) for r in runs]
    for r, best, t in zip(runs, best_in_budget, times):
        r["time_to_target_s"] = t
        print(f"seed {r['seed']}: best within {args.budget_tokens:,} tokens = {best:.4f}, "
              f"time to {target} = {t:.1f} s, {r['tokens_per_s']} tokens/s, MFU {r['mfu']:.1%}")
    median = statistics.median(times)
    summary = (f"reference runs, seeds {args.seeds}, eager {runs[0]['precision']} on {torch.get_num_threads()} threads: every seed reaches {target} within "
               f"{args.budget_tokens:,} tokens; median time-to-target {median:.1f} s in these runs")
    print(summary)
    evidence = {"target_log_perplexity": target, "summary": summary, "budget_tokens": args.budget_tokens,
                "machine": f"{system.cpu_model()}, {torch.get_num_threads()} threads", "precision": runs[0]["precision"],
                "torch": torch.__version__, "runs": runs}
    if args.write:
        atomic_write_text(TARGETS / f"{args.member}.json", json.dumps(evidence, indent=1) + "\n")
        print(f"wrote {TARGETS / (args.member + '.json')}")


if __name__ == "__main__":
    main()
