"""Measures a BERT CPU tier's masked-LM accuracy target from reference runs and records the evidence
in src/trainclock/workloads/bert/targets/<member>.json (not a test: run it by hand).

Each seed trains from the tier's phase-1 checkpoint with no target for --budget-samples samples; the
target is the lowest best accuracy any seed reached within that budget (rounded down), so every
reference seed reaches it. The budget is in samples, not seconds, so the target does not depend on
how busy the machine was.

  python -m tests.workloads.bert.measure_targets bert-tiny --seeds 1,2,3 --budget-samples 3200 --write
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.device import system
from trainclock.mllog.reader import read_events
from trainclock.storage import atomic_write_text
from trainclock.train.loop import TrainOptions
from trainclock.train.run import RunRequest, execute
from trainclock.workloads.base import RunSettings
from trainclock.workloads.bert import WORKLOAD
from trainclock.workloads.bert.spec import get_member

TARGETS = Path(__file__).resolve().parents[3] / "src" / "trainclock" / "workloads" / "bert" / "targets"


def reference_run(name: str, seed: int, budget: int, out: Path) -> dict:
    spec = replace(get_member(name), target_accuracy=1.0)  # never reached: the full curve
    options = TrainOptions(device=torch.device("cpu"), max_samples=budget)
    result = execute(RunRequest(workload=WORKLOAD, spec=spec, settings=RunSettings(), out=out, seed=seed,
                                options=options, progress=False))
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    precision = next(e.value for e in read_events(result.log_path)[0] if e.key == "trainclock_precision")
    evals = [(r["time_s"], r["samples"], next(iter(r["eval"].values()))) for r in records if "eval" in r]
    return {"seed": seed, "precision": precision, "evals": evals, "samples_per_s": round(result.units_per_s, 1),
            "mfu": round(result.mfu, 4), "final_train_loss": round(result.outcome.final_loss, 4)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("member")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--budget-samples", type=int, required=True)
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as out:
        runs = [reference_run(args.member, seed, args.budget_samples, Path(out)) for seed in seeds]
    best = [max(m for _, samples, m in r["evals"] if samples <= args.budget_samples) for r in runs]
    target = math.floor(min(best) * 1000) / 1000
    for r in runs:
        r["time_to_target_s"] = next(t for t, _, m in r["evals"] if m >= target)
        print(f"seed {r['seed']}: evals {[(s, round(m, 4)) for _, s, m in r['evals']]}, time to {target} = "
              f"{r['time_to_target_s']:.1f} s, {r['samples_per_s']} samples/s")
    median = statistics.median(r["time_to_target_s"] for r in runs)
    load = os.getloadavg()
    summary = (f"reference runs, seeds {args.seeds}, eager {runs[0]['precision']} on {torch.get_num_threads()} threads "
               f"from the phase-1 checkpoint: every seed reaches {target} within {args.budget_samples:,} samples; "
               f"median time-to-target {median:.1f} s in these runs (load average {load[0]:.1f})")
    print(summary)
    evidence = {"target_accuracy": target, "summary": summary, "budget_samples": args.budget_samples,
                "machine": f"{system.cpu_model()}, {torch.get_num_threads()} threads", "precision": runs[0]["precision"],
                "load_average_1_5_15": [round(x, 2) for x in load], "torch": torch.__version__, "runs": runs}
    if args.write:
        atomic_write_text(TARGETS / f"{args.member}.json", json.dumps(evidence, indent=1) + "\n")
        print(f"wrote {TARGETS / (args.member + '.json')}")


if __name__ == "__main__":
    main()
