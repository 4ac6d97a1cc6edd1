"""Measures a CPU member's quality target from reference runs and records the evidence, for any
workload: <workload package>/targets/<member>.json (read back by trainclock.workload.evidence).

Each seed trains the member with its own data and schedule for --budget-samples samples without
stopping at a target (the full curve). For each quality metric the target is the worst best value
any seed reached within the first (1 - --headroom) of the budget, rounded toward the easier side, so
every reference seed reaches it with the rest of the budget to spare: a seed or a machine that was not
measured (other CPU kernels round differently) then still reaches it within the member's budget,
where the worst best over the whole budget fails about one new seed in n+1. The budget is in samples, not seconds, so the target does not depend on how busy the machine
was; pick it as the samples this machine trains in the time you want. Each seed's time-to-target
is read off its own eval curve (and is only as quiet as the machine was: the load is recorded).

  python benchmarks/reference_targets.py resnet-mini --seeds 1,2,3 --budget-samples 60000 --headroom 0.2 --write

--from-evidence re-derives the target from the curves already recorded in targets/<member>.json
(another --headroom: where evaluations are coarse, 30% of the budget can leave one evaluation
fewer inside the window than 25%) without training again.

--learning-share S sets the target at that share of the way from the median first evaluation to
the median best (the tier rule's learning share, issue 34) instead of at the worst seed's best: a
target near the plateau, where seeds that flatten at different heights cross it far apart, is what
makes samples-to-target unstable. Every seed must still reach it within the window; the tier rule's
five points are printed for the target chosen.

--most-share S keeps the worst seed's value as the target but moves any metric whose value lies
further than S of that way (near its plateau) back to the S point: where seeds flatten at different
heights, a target at the worst reference seed's plateau is one a new seed's plateau misses (sd-mini's
FID at 0.95 of the way: held-out seed 12 flattened at 1,235 against 1,215).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import statistics
import tempfile
from pathlib import Path

import torch

from trainclock.device import system
from trainclock.distributed.layout import Layout
from trainclock.mllog.reader import read_events
from trainclock.storage import atomic_write_text
from trainclock.train.options import TrainOptions
from trainclock.train.run import RunRequest, execute
from trainclock.workload import registry
from trainclock.workload.base import QualityTarget, RunSettings
from trainclock.workload.evidence import units_to_target
from trainclock.review.rcp import largest_cv
from trainclock.workload.tier_rule import curves, judge, start_and_plateau


def reference_run(member: str, seed: int, budget: int, precision: str, out: Path) -> tuple[dict, tuple]:
    workload, name = registry.find(member)
    device = torch.device("cpu")
    spec = workload.resolve(name, RunSettings(), Layout(), device)
    options = TrainOptions(device=device, precision=precision, max_samples=budget, full_curve=True)
    result = execute(RunRequest(workload=workload, spec=spec, settings=RunSettings(), out=out, seed=seed,
                                options=options, progress=False))
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    used = next(e.value for e in read_events(result.log_path)[0] if e.key == "trainclock_precision")
    evals = [[r["time_s"], r["samples"], r["units"], r["eval"]] for r in records if "eval" in r]
    units_per_sample = records[-1]["units"] / records[-1]["samples"]
    run = {"seed": seed, "precision": used, "evals": evals, "samples_per_s": round(result.units_per_s / units_per_sample, 2),
           "units_per_s": round(result.units_per_s, 2), "mfu": round(result.mfu, 4),
           "final_train_loss": round(result.outcome.final_loss, 4)}
    return run, result.quality


def best_within(run: dict, target: QualityTarget, budget: int) -> float:
    values = [metrics[target.metric] for _, samples, _, metrics in run["evals"] if samples <= budget]
    return max(values) if target.direction == "higher" else min(values)


def rounded_easier(value: float, direction: str) -> float:
    """Three decimals, rounded so that the value itself still meets the target."""
    return math.floor(value * 1000) / 1000 if direction == "higher" else math.ceil(value * 1000) / 1000


def share_targets(runs: list[dict], quality: tuple[QualityTarget, ...], share: float) -> dict[str, float]:
    """Each metric's target `share` of the way from the median start to the median best."""
    all_curves = [c for c in curves(runs) if c]
    targets = {}
    for t in quality:
        start, plateau = start_and_plateau(all_curves, t)
        targets[t.metric] = rounded_easier(start + share * (plateau - start), t.direction)
    return targets


def capped_targets(runs: list[dict], quality: tuple[QualityTarget, ...], targets: dict[str, float],
                   share: float) -> dict[str, float]:
    """`targets`, each moved back to the point `share` of the way from start to plateau where it lies further."""
    cap = share_targets(runs, quality, share)
    # the easier of the two: a "higher" metric's smaller value, a "lower" one's larger
    return {t.metric: (min if t.direction == "higher" else max)(targets[t.metric], cap[t.metric]) for t in quality}


def reached_within(run: dict, quality: tuple[QualityTarget, ...], samples: int) -> bool:
    return any(all(t.met(m[t.metric]) for t in quality) for _, done, _, m in run["evals"] if done <= samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("member")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--budget-samples", type=int,
                   help="samples within which every seed must reach the target")
    p.add_argument("--headroom", type=float, default=0.2,
                   help="the share of the budget left to spare: the target is measured within the rest")
    p.add_argument("--precision", default="fp32", choices=("auto", "bf16", "fp32"))
    p.add_argument("--learning-share", type=float, metavar="S",
                   help="the target at this share of the median gain from the first evaluation to the best "
                        "(e.g. 0.8) instead of the worst seed's best within the window")
    p.add_argument("--most-share", type=float, metavar="S",
                   help="the worst seed's value, but no metric's target further than this share of the median gain "
                        "from the first evaluation to the best (e.g. 0.85)")
    p.add_argument("--write", action="store_true", help="write targets/<member>.json in the workload's package")
    p.add_argument("--from-evidence", action="store_true",
                   help="no training: the seeds, budget and curves recorded in targets/<member>.json")
    p.add_argument("--add-seeds", metavar="SEEDS",
                   help="train these seeds only, at the recorded budget and precision, and derive the target from "
                        "them with the runs already recorded in targets/<member>.json (the tier rule wants 5 or more)")
    args = p.parse_args()
    if not 0 <= args.headroom < 1:
        p.error("--headroom is a share of the budget: pick a number in [0, 1)")
    for flag, share in (("--learning-share", args.learning_share), ("--most-share", args.most_share)):
        if share is not None and not 0 < share <= 1:
            p.error(f"{flag} is a share of the gain from start to plateau: pick a number in (0, 1]")
    if args.learning_share is not None and args.most_share is not None:
        p.error("--learning-share sets every target at one share; --most-share only caps the worst seed's: give one")
    workload, name = registry.find(args.member)
    path = Path(inspect.getfile(type(workload))).parent / "targets" / f"{name}.json"
    recorded: dict = {}
    if args.from_evidence or args.add_seeds:
        flag = "--from-evidence" if args.from_evidence else "--add-seeds"
        try:
            recorded = json.loads(path.read_text())
            runs, args.budget_samples = recorded["runs"], recorded["budget_samples"]
        except (OSError, ValueError, KeyError) as e:
            p.error(f"{flag}: no recorded curves for {name} in {path} ({e}); record them first")
        quality = next(m.quality for m in workload.members() if m.name == name)
        load = tuple(recorded["load_average_1_5_15"])  # the recorded runs' machine, not this moment's
        machine, torch_version = recorded["machine"], recorded["torch"]
        if args.add_seeds:
            new_seeds = [int(seed) for seed in args.add_seeds.split(",")]
            if clash := {r["seed"] for r in runs} & set(new_seeds):
                p.error(f"--add-seeds: seeds {sorted(clash)} are already recorded for {name}")
            if torch.__version__ != torch_version:
                p.error(f"--add-seeds: the recorded runs used torch {torch_version}, this is {torch.__version__}; "
                        "record every seed again instead")
            with tempfile.TemporaryDirectory() as out:
                runs = runs + [reference_run(name, seed, args.budget_samples, recorded["precision"], Path(out))[0]
                               for seed in new_seeds]
            load = tuple(max(a, b) for a, b in zip(load, os.getloadavg()))  # the busier of the two sessions
        args.seeds = ",".join(str(r["seed"]) for r in runs)
    else:
        if args.budget_samples is None:
            p.error("give --budget-samples (the samples within which every seed must reach the target)")
        with tempfile.TemporaryDirectory() as out:
            measured = [reference_run(name, int(seed), args.budget_samples, args.precision, Path(out))
                        for seed in args.seeds.split(",")]
        runs, quality = [r for r, _ in measured], measured[0][1]
        load = os.getloadavg()
        machine, torch_version = f"{system.cpu_model()}, {torch.get_num_threads()} threads", torch.__version__
    measured_within = int(args.budget_samples * (1 - args.headroom))
    easiest = lambda t, values: rounded_easier((min if t.direction == "higher" else max)(values), t.direction)  # noqa: E731
    if args.learning_share is not None:
        targets = share_targets(runs, quality, args.learning_share)
    elif len(quality) == 1:
        targets = {t.metric: easiest(t, [best_within(r, t, measured_within) for r in runs]) for t in quality}
    else:  # every metric must hold at one evaluation: each seed's last evaluation within the window
        last = [[m for _, samples, _, m in r["evals"] if samples <= measured_within][-1] for r in runs]
        targets = {t.metric: easiest(t, [m[t.metric] for m in last]) for t in quality}
    if args.most_share is not None:
        targets = capped_targets(runs, quality, targets, args.most_share)
    met = tuple(QualityTarget(t.metric, targets[t.metric], t.direction) for t in quality)
    late = [r["seed"] for r in runs if not reached_within(r, met, measured_within)]
    if late:
        p.error(f"seeds {late} do not reach {targets} within {measured_within:,} samples: choose a smaller "
                "--learning-share or a larger budget")
    for r in runs:
        reached = units_to_target(r, met)
        r["time_to_target_s"] = next(t for t, _, units, _ in r["evals"] if units == reached)
        curve = [(samples, {k: round(v, 4) for k, v in m.items()}) for _, samples, _, m in r["evals"]]
        print(f"seed {r['seed']}: evals {curve}; time to target {r['time_to_target_s']:.1f} s, "
              f"{r['samples_per_s']} samples/s, MFU {r['mfu']:.1%}")
    median = statistics.median(r["time_to_target_s"] for r in runs)
    shown = ", ".join(f"{m} {'>=' if t.direction == 'higher' else '<='} {targets[m]}" for m, t in
                      zip(targets, quality))
    summary = (f"reference runs, seeds {args.seeds}, eager {runs[0]['precision']} on {machine.rsplit(', ', 1)[-1]}: "
               f"every seed reaches {shown} within {measured_within:,} of the budget's {args.budget_samples:,} samples; "
               f"median time-to-target "
               f"{median:.1f} s in these runs (load average {load[0]:.1f})")
    print(summary)
    # a recorded file's other facts (e.g. a best achievable value) are kept
    evidence = {**recorded, "targets": targets, "summary": summary, "budget_samples": args.budget_samples,
                "measured_within_samples": measured_within,
                "machine": machine, "precision": runs[0]["precision"],
                "load_average_1_5_15": [round(x, 2) for x in load], "torch": torch_version, "runs": runs}
    workload_cv = largest_cv(workload.key, f"{workload.mlperf_round}.0")
    for point in judge(runs, met, workload_cv):
        print(f"  {'ok  ' if point.passed else 'FAIL'} {point.name}: {point.shown}")
    if args.write:
        path.parent.mkdir(exist_ok=True)
        atomic_write_text(path, json.dumps(evidence, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
