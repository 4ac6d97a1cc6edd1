"""Checks a CPU member's recorded target the way a user meets it: full runs to the target with
seeds the reference runs did not use, each timed as MLPerf times it (run_stop - run_start).
With --write the results go into targets/<member>.json under "verification".

  python benchmarks/verify_target.py gpt3-mini --seeds 11,12,13 --write
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch

from trainclock.storage import atomic_write_text
from trainclock.train.options import TrainOptions
from trainclock.device.peak import matmul_peak_flops
from trainclock.train.run import RunRequest, execute
from trainclock.workload.base import RunSettings
from trainclock.workloads.gpt3 import WORKLOAD
from trainclock.workloads.gpt3.spec import get_member

TARGETS = Path(__import__("trainclock.workloads.gpt3", fromlist=["x"]).__file__).parent / "targets"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("member")
    p.add_argument("--seeds", default="11,12,13")
    p.add_argument("--write", action="store_true")
    args = p.parse_args()
    spec = get_member(args.member)
    device = torch.device("cpu")
    runs = []
    with tempfile.TemporaryDirectory() as out:
        for seed in (int(s) for s in args.seeds.split(",")):
            request = RunRequest(workload=WORKLOAD, spec=spec, settings=RunSettings(), out=Path(out), seed=seed,
                                 options=TrainOptions(device=device), progress=False)
            result = execute(request)
            runs.append({"seed": seed, "status": result.outcome.status, "time_to_train_s": round(result.time_to_train_s, 1),
                         "tokens": result.outcome.units, "tokens_per_s": round(result.units_per_s),
                         "mfu": round(result.mfu, 4), "bf16_peak_gflops": round(result.peak_flops / 1e9)})
            print(runs[-1])
    times = [r["time_to_train_s"] for r in runs]
    summary = {"seeds": args.seeds, "median_time_to_train_s": statistics.median(times), "max_time_to_train_s": max(times),
               "all_reached": all(r["status"] == "success" for r in runs),
               "bf16_peak_gflops_now": round(matmul_peak_flops(device, torch.bfloat16) / 1e9), "runs": runs}
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}))
    if args.write:
        path = TARGETS / f"{args.member}.json"
        evidence = json.loads(path.read_text())
        evidence["verification"] = summary
        atomic_write_text(path, json.dumps(evidence, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
