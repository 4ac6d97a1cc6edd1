"""The planner on this machine's CPU, calibrated on trainclock's own stored runs: a run is split
into steady training, evaluations and the rest; the fit recovers the efficiency a run was timed
with; leave-one-out predicts each run from the others; the store's runs are read with their
header, and those of another tier target, CPU or thread count are left out, saying why."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from rich.console import Console

from trainclock.commands.stored_runs import own_run
from trainclock.device.system import cpu_identity
from trainclock.planner.model.convergence import eval_interval_samples, load_convergence
from trainclock.planner.model.hardware import Accelerator, this_cpu
from trainclock.planner.calibration.own_runs import (OwnRun, calibration_runs, cpu_plan, fit, leave_one_out, measured_peaks,
                                         parts, same_machine)
from trainclock.planner.model.step_time import Efficiency, eval_seconds, step_time
from trainclock.planner.model.workload_view import cost_model
from trainclock.results.queries import FinishedRun
from trainclock.workloads.gpt3.spec import get_member

MEMBER = "gpt3-tiny"
CPU = Accelerator(id="this-cpu", name="test CPU", peak_flops={"bf16": 2e12, "fp32": 3e11}, memory_bytes=24e9,
                  memory_bandwidth=2e10, accelerators_per_node=1, intra_node_bandwidth=0.0, inter_node_bandwidth=0.0,
                  intra_node_latency=0.0, inter_node_latency=0.0)
TRUE = Efficiency(0.2, eval_overhead_s=0.05, run_overhead_s=2.5)


def timed_run(samples: float = 3072, slower: float = 1.0, seed: int = 1, cpu: str = "test cpu",
              truth: Efficiency = TRUE, peak: float = 2e12) -> OwnRun:
    """A run as the model times it under `truth` (steady steps `slower` times longer) on a machine
    whose bf16 peak was `peak` while it ran (and it measured so)."""
    cost = cost_model(MEMBER)
    base = OwnRun(MEMBER, f"result_{seed}.txt seed {seed}", cpu, "bf16", threads=1, processes=1, global_batch_size=32,
                  micro_batch=32, time_to_train_s=0.0, samples=samples, peak_flops=peak, eval_spans=None)
    plan = cpu_plan(base)
    machine = replace(CPU, peak_flops={**CPU.peak_flops, "bf16": peak})
    step = step_time(cost, 32, plan, machine, truth).step_s * slower
    one_eval = eval_seconds(cost, plan, machine, truth)
    per_interval = eval_interval_samples(cost, 32) // 32
    spans, t = [], truth.run_overhead_s
    for i in range(1, int(samples // (per_interval * 32)) + 1):
        t += per_interval * step
        spans.append((i * per_interval * 32, t, t + one_eval))
        t += one_eval
    return replace(base, time_to_train_s=t, eval_spans=tuple(spans))


def test_a_run_splits_into_steady_training_evaluations_and_the_rest():
    cost, run = cost_model(MEMBER), timed_run()
    found = parts(run, cost)
    steps = 3072 / 32
    assert found.evaluation_count == 3072 // eval_interval_samples(cost, 32)  # every evaluation inside the run
    assert found.step_s == pytest.approx(step_time(cost, 32, cpu_plan(run), CPU, TRUE).step_s, rel=1e-9)
    assert found.training == pytest.approx(steps * found.step_s, rel=1e-9)
    assert found.rest == pytest.approx(TRUE.run_overhead_s, rel=1e-6)
    assert found.training + found.evaluations + found.rest == pytest.approx(run.time_to_train_s)
    assert parts(replace(run, eval_spans=None), cost) is None


def test_a_run_evaluated_offline_is_all_training():
    """EvalSchedule.offline: the saved models are scored after run_stop, so no evaluation is timed."""
    cost, run = cost_model(MEMBER), timed_run()
    after = tuple((n, run.time_to_train_s + 1 + i, run.time_to_train_s + 2 + i) for i, (n, _, _) in enumerate(run.eval_spans))
    found = parts(replace(run, eval_spans=after), cost)
    assert (found.evaluations, found.evaluation_count, found.rest) == (0.0, 0, 0.0)
    assert found.training == found.total == run.time_to_train_s
    assert found.step_s == pytest.approx(run.time_to_train_s / (3072 / 32))


def test_the_fit_recovers_the_efficiency_the_runs_were_timed_with():
    found = fit(cost_model(MEMBER), CPU, [timed_run(seed=s) for s in (1, 2, 3)])
    assert found.efficiency.compute == pytest.approx(TRUE.compute, rel=1e-4)
    assert found.efficiency.eval_overhead_s == pytest.approx(TRUE.eval_overhead_s, rel=1e-3)
    assert found.efficiency.run_overhead_s == pytest.approx(TRUE.run_overhead_s, rel=1e-6)
    assert found.runs == 3 and "3 stored gpt3-tiny runs" in found.source
    assert found.efficiency.eval_compute is None  # evaluations no faster than training's efficiency implies


def test_a_first_interval_cheaper_than_the_steady_steps_makes_the_rest_negative_and_the_fit_keeps_it():
    # steps that grow dearer as the model learns (a detector's mask head on more positive RoIs):
    # floored at zero, the rest would overpredict every run by what the first interval saved
    cost, truth = cost_model(MEMBER), replace(TRUE, run_overhead_s=-0.3)
    runs = [timed_run(seed=s, truth=truth) for s in (1, 2, 3)]
    assert runs[0].eval_spans[0][1] > 0
    assert parts(runs[0], cost).rest == pytest.approx(-0.3, rel=1e-6)
    assert fit(cost, CPU, runs).efficiency.run_overhead_s == pytest.approx(-0.3, rel=1e-6)
    (check,) = leave_one_out(runs, CPU, cost_model, lambda c: load_convergence(c, lambda: Path("/nonexistent")))
    assert all(abs(r.timed_error) < 1e-4 for r in check.rows)


def test_runs_on_a_machine_whose_speed_drifts_are_each_timed_at_the_peak_they_measured():
    # a shared VM: the same run 1.3x slower when its measured peak is 1.3x lower
    cost = cost_model(MEMBER)
    runs = [timed_run(seed=1), timed_run(seed=2, peak=2e12 / 1.3), timed_run(seed=3, peak=2e12 / 1.1)]
    found = fit(cost, CPU, runs)
    assert found.efficiency.compute == pytest.approx(TRUE.compute, rel=1e-4)
    assert found.efficiency.eval_overhead_s == pytest.approx(TRUE.eval_overhead_s, rel=1e-3)
    (check,) = leave_one_out(runs, CPU, cost_model, lambda c: load_convergence(c, lambda: Path("/nonexistent")))
    assert all(abs(r.timed_error) < 1e-4 for r in check.rows)
    # without its own peak a run is timed at the machine's given one
    assert fit(cost, CPU, [replace(r, peak_flops=None) for r in runs]).efficiency.compute != pytest.approx(TRUE.compute,
                                                                                                        rel=1e-2)


def test_evaluations_faster_than_training_implies_get_their_own_efficiency():
    cost = cost_model(MEMBER)
    truth = Efficiency(0.2, run_overhead_s=2.5, eval_compute=0.35)  # forward-only nearer the peak
    runs = [timed_run(seed=s, truth=truth) for s in (1, 2, 3)]
    found = fit(cost, CPU, runs)
    assert found.efficiency.compute == pytest.approx(0.2, rel=1e-4)
    assert found.efficiency.eval_compute == pytest.approx(0.35, rel=1e-3)
    assert found.efficiency.eval_overhead_s == 0
    plan = cpu_plan(runs[0])
    assert eval_seconds(cost, plan, CPU, found.efficiency) == pytest.approx(parts(runs[0], cost).eval_s, rel=1e-3)
    # at training's efficiency the evaluation would take 0.35 / 0.2 times as long
    assert eval_seconds(cost, plan, CPU, Efficiency(0.2)) == pytest.approx(1.75 * parts(runs[0], cost).eval_s, rel=1e-3)


def test_leave_one_out_predicts_each_run_from_the_others():
    cost = cost_model(MEMBER)
    convergence = load_convergence(cost, lambda: Path("/nonexistent"))  # a measured tier: its reference runs
    runs = [timed_run(seed=1), timed_run(seed=2), timed_run(seed=3, slower=1.25)]
    (check,) = leave_one_out(runs, CPU, cost_model, lambda c: convergence)
    assert check.member == MEMBER and len(check.rows) == 3
    same, _, slow = check.rows
    assert 0 < same.error < 0.125  # fitted on a normal and a 25% slower run: the median of their steps
    assert slow.part_error("training") == pytest.approx(1 / 1.25 - 1, rel=1e-6)  # fitted on the two faster runs
    assert slow.part_error("evaluations") == pytest.approx(0, abs=1e-6)
    assert check.measured_s == pytest.approx(same.run.time_to_train_s)
    # a tier's runs trained further than its reference runs needed (another precision converges
    # elsewhere): their progress stands for the tier's, each run predicted from the others'
    further = [timed_run(samples=4096, seed=s) for s in (1, 2, 3)]
    (far,) = leave_one_out(further, CPU, cost_model, lambda c: convergence)
    assert all(abs(r.timed_error) < 1e-6 and abs(r.error) < 1e-6 for r in far.rows)
    assert far.samples_source == "the tier's other stored runs"
    # with one other run there is no progress to take from the stored runs: the reference runs' stands
    (two,) = leave_one_out(further[:2], CPU, cost_model, lambda c: convergence)
    assert two.rows[0].predicted.samples == 3072 and "reference runs" in two.samples_source
    assert two.error == pytest.approx(timed_run(samples=3072).time_to_train_s / further[0].time_to_train_s - 1, abs=1e-6)


def test_a_tiers_predicted_median_is_that_of_every_runs_outcomes_at_the_others_progress():
    # two fast runs, one of which met the target an evaluation early, and two slow ones: the
    # median of times is not the time at the median progress when speed and progress both vary
    runs = [timed_run(samples=3072, seed=1), timed_run(samples=4096, seed=2),
            timed_run(samples=4096, seed=3, peak=2e12 / 1.3), timed_run(samples=4096, seed=4, peak=2e12 / 1.3)]
    (check,) = leave_one_out(runs, CPU, cost_model, lambda c: load_convergence(c, lambda: Path("/nonexistent")))
    expected = [timed_run(samples=other.samples, peak=run.peak_flops).time_to_train_s
                for run in runs for other in runs if other is not run]
    assert sorted(t for r in check.rows for t in r.outcomes) == pytest.approx(sorted(expected), rel=1e-4)
    assert check.predicted_s == pytest.approx(statistics.median(expected), rel=1e-4)
    assert check.predicted_s != pytest.approx(statistics.median(r.predicted.time_to_train_s for r in check.rows),
                                              rel=1e-3)
    low, high = check.measured_interval  # where the median of four other such runs could fall
    assert low < check.measured_s < high and (low, high) == check.measured_interval  # the same every time
    assert low >= min(r.time_to_train_s for r in runs) and high <= max(r.time_to_train_s for r in runs)
    (same,) = leave_one_out([timed_run(seed=s) for s in (1, 2, 3)], CPU, cost_model,
                            lambda c: load_convergence(c, lambda: Path("/nonexistent")))
    assert same.measured_interval == (same.measured_s, same.measured_s)  # identical runs: known exactly


def test_runs_compare_only_on_the_same_kind_of_cpu_in_one_process():
    run = timed_run(cpu="Xeon [amx_bf16], 2 vCPUs")
    assert same_machine(run, "Xeon [amx_bf16], 2 vCPUs")
    assert not same_machine(run, "Xeon [avx512f], 2 vCPUs")  # same name, no AMX: another machine
    assert not same_machine(replace(run, processes=2), "Xeon [amx_bf16], 2 vCPUs")


def test_this_cpus_peak_is_the_median_its_stored_runs_measured():
    runs = [replace(timed_run(), peak_flops=p) for p in (1e12, 2.4e12, 2.2e12)] + [
        replace(timed_run(), precision="fp32", peak_flops=3e11), replace(timed_run(), peak_flops=None)]
    peaks, source = measured_peaks(runs)
    assert peaks == {"bf16": 2.2e12, "fp32": 3e11} and "3 in bf16, 1 in fp32" in source
    cpu = this_cpu(peaks, source)
    assert cpu.peak_flops == peaks and "median of the stored runs" in cpu.source
    assert this_cpu({"bf16": 1e12}, "given").peak_flops["fp32"] > 0  # a precision no run gives is measured
    # a plan of a member divides by the peaks its own calibration runs measured: a workload that
    # sets 1 thread measures about half the 2-thread peak the other tiers' runs measured
    others = [replace(timed_run(seed=s), member="gpt3-mini", threads=2, peak_flops=2.4e12) for s in (4, 5, 6)]
    single = [replace(timed_run(seed=s), peak_flops=p) for s, p in ((7, 1.1e12), (8, 1.3e12))]
    peaks, source = measured_peaks(others + single, MEMBER, threads=2)
    assert peaks == {"bf16": 1.2e12} and f"stored {MEMBER} runs" in source
    assert measured_peaks(others, MEMBER, threads=2)[0] == {"bf16": 2.4e12}  # none of its own: every run's


def test_a_plan_calibrates_on_its_thread_count_else_the_one_its_runs_used():
    one, two = timed_run(seed=1), replace(timed_run(seed=2), threads=2)
    fp32 = replace(timed_run(seed=3), precision="fp32")
    assert calibration_runs([one, two, fp32], MEMBER, "bf16", 2) == [two]
    assert calibration_runs([one, one, two, fp32], MEMBER, "bf16", 4) == [one, one]  # a workload that sets its own
    assert calibration_runs([one, two], MEMBER, "fp32", 2) == []
    assert calibration_runs([one, two], "gpt3-mini", "bf16", 2) == []


HEADER = {"trainclock_workload": MEMBER, "trainclock_target": get_member(MEMBER).quality[0].threshold, "trainclock_precision": "bf16",
          "trainclock_threads": 2, "trainclock_cpu": "Xeon [amx_bf16], 2 vCPUs", "gradient_accumulation_steps": 2,
          "trainclock_parallel_layout": "dp=1 (ddp) tp=1 pp=1", "seed": 7}


def finished(**header) -> FinishedRun:
    return FinishedRun("result_0.txt", {**HEADER, **header}, 20_000.0, 3072.0, 32,
                       [[1024, 6.0, 6.1], [2048, 12.0, 12.1]])


def test_a_stored_run_is_read_with_how_it_ran():
    run, why = own_run(finished())
    assert why == "" and run.member == MEMBER and run.cpu == "Xeon [amx_bf16], 2 vCPUs"
    assert (run.precision, run.threads, run.processes, run.micro_batch) == ("bf16", 2, 1, 16)
    assert run.peak_flops is None  # not logged: the run still calibrates, the peak comes from others
    assert run.time_to_train_s == 20.0 and run.samples == 3072
    assert run.eval_spans == ((1024, 6.0, 6.1), (2048, 12.0, 12.1))
    assert own_run(finished(trainclock_parallel_layout="dp=2 (ddp) tp=1 pp=1"))[0].processes == 2


@pytest.mark.parametrize("spans", ["garbage", [[1, 2]], [["x", 1, 2]], [], None])
def test_stored_spans_the_planner_cannot_read_leave_the_run_without_parts(spans):
    run, why = own_run(replace(finished(), eval_spans=spans))
    assert why == "" and run.eval_spans is None and parts(run, cost_model(MEMBER)) is None


@pytest.mark.parametrize(("header", "why"), [
    ({"trainclock_target": 5.5}, "another target"),  # an overridden or older target measures something else
    ({"trainclock_workload": "gpt3-175b"}, "not of a trainclock CPU tier"),
    ({"trainclock_workload": "no-such-tier"}, "not of a trainclock CPU tier"),
    ({"trainclock_workload": None}, "not of a trainclock CPU tier"),
    ({"trainclock_cpu": None}, "before runs recorded their CPU"),
    ({"trainclock_threads": "two"}, "before runs recorded their CPU"),
    ({"trainclock_precision": "auto"}, "before runs recorded their CPU"),
])
def test_a_stored_run_that_cannot_calibrate_is_left_out_saying_why(header, why):
    run, reason = own_run(finished(**header))
    assert run is None and why in reason


# --- through the command line, on a real SQLite store of imported logs -------------------------------

def write_log(path: Path, seed: int, spans: list[tuple[float, float]], stop_s: float, **header) -> None:
    """A trainclock gpt3-tiny log of a run that met its target at 3,072 samples."""
    t0 = 1_800_000_000_000
    values = {"submission_benchmark": "gpt3", "submission_org": "trainclock", "submission_division": "open",
              "submission_status": "onprem", "submission_platform": "test_cpux1", "seed": seed,
              "global_batch_size": 32, **HEADER, "gradient_accumulation_steps": 1, "eval_samples": 8192,
              "trainclock_cpu": cpu_identity(), "trainclock_threads": torch.get_num_threads(),
              "trainclock_matmul_peak_flops": 2_000_000_000_000, **header}
    lines = [("INTERVAL_START", "init_start", None, {}, 0)]
    lines += [("POINT_IN_TIME", key, value, {}, 1) for key, value in values.items() if key != "trainclock_target"]
    lines.append(("POINT_IN_TIME", "trainclock_target", values["trainclock_target"],
                  {"metric": "validation log perplexity (nats/token)", "direction": "lower"}, 1))
    lines.append(("POINT_IN_TIME", "trainclock_progress_unit", "tokens",
                  {"per_sample": 128, "logged_in": "units", "samples_per_epoch": None}, 1))
    lines += [("INTERVAL_END", "init_stop", None, {}, 2), ("INTERVAL_START", "run_start", None, {}, 10)]
    for i, (a, b) in enumerate(spans, 1):
        tokens = {"epoch_num": i * 131072}
        lines += [("INTERVAL_START", "eval_start", None, tokens, 10 + a * 1000),
                  ("POINT_IN_TIME", "eval_accuracy", 5.5 - 0.25 * i, tokens, 10 + b * 1000),
                  ("INTERVAL_END", "eval_stop", None, tokens, 10 + b * 1000)]
    lines.append(("INTERVAL_END", "run_stop", None, {"status": "success"}, 10 + stop_s * 1000))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(":::MLLOG " + json.dumps({"namespace": "", "time_ms": t0 + t, "event_type": kind, "key": key,
                                                      "value": value, "metadata": meta}) + "\n"
                            for kind, key, value, meta, t in lines))


def test_plan_validate_and_plan_this_cpu_use_the_stored_runs(cli, capsys, tmp_path):
    from trainclock.commands import plan as plan_command
    from trainclock.console import table_console
    from trainclock.device.peak import resolve_precision

    precision = resolve_precision("auto", torch.device("cpu"))  # what a plan for this CPU trains in
    folder = tmp_path / "results" / "test_cpux1" / MEMBER
    for seed, step in ((1, 6.0), (2, 6.3), (3, 5.8)):
        spans = [(3 + step * i + 0.1 * (i - 1), 3 + step * i + 0.1 * i) for i in (1, 2, 3)]
        write_log(folder / f"result_{seed}.txt", seed, spans, spans[-1][1], trainclock_precision=precision)
    write_log(folder / "result_9.txt", 9, [(5, 5.1), (10, 10.1), (15, 15.1)], 15.1, trainclock_cpu="another CPU")
    write_log(folder / "result_8.txt", 8, [(5, 5.1), (10, 10.1), (15, 15.1)], 15.1, trainclock_target=5.0)
    db = tmp_path / "results.db"
    code, out, err = cli("results", "import", tmp_path / "results", "--db", db)
    assert code == 0, err
    capsys.readouterr()
    plan_command._validate_own_runs(SimpleNamespace(db=str(db), mlperf_results=None), table_console(Console(width=200)))
    table = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert f"{MEMBER} {precision} 1 3 " in table  # the tier, its precision, 1 thread, 3 runs
    assert re.search(r"1 of 1 tiers within 10%; [01] predicted inside the measured median's interval", table)
    assert "1 trained to another target than the tier's current one" in table
    assert "1 on another kind of CPU, or in several processes" in table
    code, out, err = cli("plan", MEMBER, "--accelerator", "this-cpu", "--count", "1", "--db", db)
    assert code == 0, err
    flat = " ".join(out.split()).replace("│ ", "")
    assert f"3 stored {MEMBER} runs on this CPU ({precision}, 1 thread)" in flat
    assert f"(median of 3 stored {MEMBER} runs in {precision} on this CPU)" in flat  # their progress to target
    assert f"matmul peak 2 TFLOP/s (matmul peak: the median of the stored {MEMBER} runs' own measurements (3 in" in flat
    assert "rest of the run +3.0 s (start-up and warm-up" in flat  # each run's first interval: 3 s over a steady one


def test_plan_validate_says_why_it_has_no_cpu_tier_to_check(cli, capsys, tmp_path):
    from trainclock.commands import plan as plan_command
    from trainclock.console import table_console

    plan_command._validate_own_runs(SimpleNamespace(db=str(tmp_path / "none.db"), mlperf_results=None),
                                    table_console(Console(width=200)))
    line = capsys.readouterr().out.strip()
    assert line.startswith("trainclock: the CPU tiers are not validated:") and "\n" not in line
