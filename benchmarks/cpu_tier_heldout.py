"""The CPU-tier planner out of sample: each tier fitted on one results store's runs (as `plan
--accelerator this-cpu` fits them) predicts the median time-to-train of another store's runs of
it, taken later (new seeds, another spell of a shared host). `plan --validate` leaves one run out
of one store; this leaves a whole sitting out.

    benchmarks/cpu_tier_runs.sh /tmp/first.db /tmp/first "201 202 203 204"     # calibration
    benchmarks/cpu_tier_runs.sh /tmp/later.db /tmp/later "220 221 222 223"     # held out
    .venv/bin/python benchmarks/cpu_tier_heldout.py /tmp/first.db /tmp/later.db

Per tier it prints the held-out runs' measured median (and its 95% bootstrap interval), the
median of the model's outcomes for each held-out run at its own measured peak and each calibration
run's progress, and the plan a user gets before running (the calibration runs' median peak and
median progress), each with its error, and both runs' median peaks."""

from __future__ import annotations

import argparse
import statistics

from trainclock.commands.stored_runs import read_this_machines_runs
from trainclock.errors import DataError
from trainclock.planner.model.convergence import load_convergence
from trainclock.planner.model.hardware import this_cpu
from trainclock.planner.calibration.mlperf_data import results_dir
from trainclock.planner.calibration.own_runs import OwnRun, MemberCheck, check_run, cpu_plan, fit, measured_peaks, own_convergence
from trainclock.planner.model.predict import predict
from trainclock.planner.model.workload_view import cost_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("calibration", help="results store whose runs the plan is fitted on")
    parser.add_argument("held_out", help="results store of later runs to predict")
    args = parser.parse_args()
    try:
        calibration, held_out = [read_this_machines_runs(db).runs for db in (args.calibration, args.held_out)]
    except DataError as error:
        raise SystemExit(f"cpu_tier_heldout: {error}") from None
    groups: dict[tuple, list[OwnRun]] = {}
    for run in calibration:
        groups.setdefault(run.group, []).append(run)
    within = within_planned = inside = tiers = 0
    print(f"{'tier':15s} {'runs':>9s} {'measured (s) [95%]':>24s} {'predicted':>17s} {'plan':>15s} {'peaks TFLOP/s':>16s}")
    for group, runs in sorted(groups.items()):
        later = [r for r in held_out if r.group == group]
        if not later:
            continue
        cost = cost_model(group[0])
        machine = this_cpu(*measured_peaks(runs))
        fitted = fit(cost, machine, runs)
        if fitted is None:
            continue
        convergence = own_convergence(cost, runs, load_convergence(cost, lambda: results_dir(None)))
        # the held-out runs, each with its outcomes at every calibration run's progress
        check = MemberCheck(group[0], group[1], group[2],
                            tuple(check_run(cost, machine, r, fitted.efficiency, convergence, runs) for r in later),
                            "calibration store")
        planned = predict(cost, machine, runs[0].global_batch_size, cpu_plan(runs[0]), fitted.efficiency,
                          convergence).time_to_train_s
        low, high = check.measured_interval
        planned_error = planned / check.measured_s - 1
        tiers += 1
        within += abs(check.error) <= 0.1
        within_planned += abs(planned_error) <= 0.1
        inside += low <= check.predicted_s <= high
        peak = statistics.median(r.peak_flops or 0 for r in later) / 1e12
        print(f"{group[0]:15s} {len(runs):3d} / {len(later):3d} {check.measured_s:8.1f} [{low:6.1f}-{high:6.1f}] "
              f"{check.predicted_s:8.1f} {check.error:+7.1%} {planned:6.1f} {planned_error:+7.1%} "
              f"{machine.peak(group[1]) / 1e12:7.2f} {peak:7.2f}")
    print(f"within 10%: {within} of {tiers} tiers at the held-out runs' own peaks ({inside} inside the measured "
          f"median's interval); {within_planned} of {tiers} planned at the calibration runs' median peak")


if __name__ == "__main__":
    main()
