"""The scaling sweep against a stand-in runner: what it runs, what it reads, what it computes and saves."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from trainclock.commands.scale import print_table
from trainclock.errors import DataError, TrainclockError, UsageError
from trainclock import sweep

from .fake_runs import FakeRunner, FakeSize, expected_throughput
from .helpers import run_command

# 1 -> 2 -> 4 processes: uneven steps, so a plain mean of per-step rates would be wrong
SIZES = {
    1: FakeSize(step_seconds=(4.0, 2.0, 2.0, 2.0), time_to_train_ms=40_000),
    2: FakeSize(step_seconds=(2.0, 1.0, 1.0, 1.0), time_to_train_ms=25_000, status="success"),
    4: FakeSize(step_seconds=(1.0, 0.5, 0.5, 1.5), time_to_train_ms=16_000),
}


def plan(tmp_path, **changes) -> sweep.SweepPlan:
    base = dict(benchmark="gpt3-tiny", sizes=(1, 2, 4), repeats=1, seed=11, out=tmp_path / "sweep",
                run_args=("--max-samples", "128"))
    return sweep.SweepPlan(**{**base, **changes})


def test_each_size_runs_the_same_seeds_in_its_own_tree(tmp_path):
    runner = FakeRunner(SIZES)
    sweep.run_sweep(plan(tmp_path, repeats=2), runner)
    assert [runner.seeds(n) for n in (1, 2, 4)] == [[11, 12]] * 3
    argv, env = runner.calls[2]
    assert argv == ["run", "gpt3-tiny", "--nproc", "2", "--seed", "11", "--no-progress",
                    "--out", str(tmp_path / "sweep" / "nproc-2"), "--max-samples", "128"]
    assert env == {}  # thread counts left to trainclock run


def test_a_fixed_thread_budget_is_split_over_the_processes(tmp_path):
    runner = FakeRunner(SIZES)
    sweep.run_sweep(plan(tmp_path, cpu_threads=4), runner)
    assert [env["OMP_NUM_THREADS"] for _, env in runner.calls] == ["4", "2", "1"]


def test_speedup_and_efficiencies_come_from_the_files(tmp_path):
    result = sweep.run_sweep(plan(tmp_path), FakeRunner(SIZES))
    rows = {r.nproc: r for r in result.rows}
    t1, t2, t4 = (expected_throughput(SIZES[n]) for n in (1, 2, 4))
    assert rows[1].units_per_s == pytest.approx(t1) and rows[4].units_per_s == pytest.approx(t4)
    assert rows[2].throughput_efficiency == pytest.approx((t2 / t1) / 2)
    assert rows[4].throughput_efficiency == pytest.approx((t4 / t1) / 4)
    assert [rows[n].time_to_train_s for n in (1, 2, 4)] == [40.0, 25.0, 16.0]
    assert rows[2].speedup == pytest.approx(1.6) and rows[4].speedup == pytest.approx(2.5)
    assert rows[2].time_to_train_efficiency == pytest.approx(0.8)
    assert rows[4].time_to_train_efficiency == pytest.approx(0.625)
    assert (rows[1].throughput_efficiency, rows[1].speedup) == (1.0, 1.0)
    assert [(r.successes, r.runs) for r in result.rows] == [(0, 1), (1, 1), (0, 1)]


def test_repeats_are_averaged(tmp_path):
    runs = [sweep.RunMeasurement(n, r, 5 + r, "log", "success", ttt, tps, 4)
            for n, r, ttt, tps in [(1, 0, 30.0, 100.0), (1, 1, 50.0, 300.0), (2, 0, 20.0, 360.0), (2, 1, 30.0, 360.0)]]
    one, two = sweep.summarize(runs)
    assert (one.time_to_train_s, one.units_per_s, one.runs) == (40.0, 200.0, 2)
    assert two.speedup == pytest.approx(40 / 25) and two.throughput_efficiency == pytest.approx(0.9)
    _, same_cores = sweep.summarize(runs, fixed_hardware=True)  # 2 processes on the cores 1 process had
    assert same_cores.throughput_efficiency == pytest.approx(1.8) and same_cores.time_to_train_efficiency == pytest.approx(1.6)


def test_the_table_is_saved_as_json_and_csv(tmp_path):
    result = sweep.run_sweep(plan(tmp_path), FakeRunner(SIZES))
    json_path, csv_path = sweep.save(result)
    saved = json.loads(json_path.read_text())
    assert saved["sizes"] == [1, 2, 4] and saved["seed"] == 11 and saved["run_args"] == ["--max-samples", "128"]
    assert [r["nproc"] for r in saved["runs"]] == [1, 2, 4]
    assert all(r["log"].startswith(str(tmp_path / "sweep" / f"nproc-{r['nproc']}")) for r in saved["runs"])
    table = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert [float(r["time_to_train_efficiency"]) for r in table] == pytest.approx([1.0, 0.8, 0.625])
    assert table[0].keys() == saved["rows"][0].keys()
    assert sorted(p.name for p in json_path.parent.iterdir()) == [
        "nproc-1", "nproc-2", "nproc-4", "scaling-gpt3-tiny.csv", "scaling-gpt3-tiny.json"]


def test_the_printed_table(tmp_path):
    result = sweep.run_sweep(plan(tmp_path), FakeRunner(SIZES))
    console = Console(file=io.StringIO(), width=240)
    print_table(result, console, unit="tokens")
    text = console.file.getvalue()
    assert "1.60x" in text and "80.0%" in text and "62.5%" in text and "2.50x" in text
    assert "stopped at a limit" in text  # two of the sizes did not reach the target


@pytest.mark.parametrize("units, rate", [("units", "units_per_s"), ("tokens", "tokens_per_s")],
                         ids=["metrics-now", "metrics-before-the-workload-interface"])
def test_throughput_counts_training_steps_once(tmp_path, units, rate):
    metrics = tmp_path / "m.jsonl"
    rows = [{"step": 0, units: 100, rate: 100.0},  # 1 s
            {"step": 1, units: 200, rate: 25.0},  # written, then lost to a resume
            {"step": 1, units: 200, rate: 50.0},  # 2 s: the resumed run's step 1
            {"step": 1, units: 200, "eval": 4.0},  # an evaluation: not training
            {"step": 2, units: 300, rate: 100.0}]  # 1 s
    metrics.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert sweep.training_throughput(metrics) == (75.0, 3)


def test_unreadable_files_are_named(tmp_path):
    with pytest.raises(DataError, match="cannot read the metrics file .*m.jsonl"):
        sweep.training_throughput(tmp_path / "m.jsonl")
    (tmp_path / "m.jsonl").write_text('{"step": 0, "eval": 4.0}\n')
    with pytest.raises(DataError, match="has no training steps"):
        sweep.training_throughput(tmp_path / "m.jsonl")


@pytest.mark.parametrize("runner, problem", [
    (FakeRunner(SIZES, exit_code=2), r"the run with 1 process\(es\) \(repeat 1\) failed \(exit code 2\)"),
    (FakeRunner(SIZES, write_log=False), r"the run with 1 process\(es\) \(repeat 1\) failed \(0 new logs\)"),
])
def test_a_failed_run_stops_the_sweep_naming_it(tmp_path, runner, problem):
    with pytest.raises(TrainclockError, match=problem) as raised:
        sweep.run_sweep(plan(tmp_path), runner)
    assert "Command: trainclock run gpt3-tiny --nproc 1 --seed 11" in str(raised.value)
    assert len(runner.calls) == 1


@pytest.mark.parametrize("argv, problem", [
    (["--nproc", "2,1"], "--nproc must list increasing positive process counts, e.g. 1,2,4; got 2,1"),
    (["--nproc", "0,1"], "--nproc must list increasing positive process counts"),
    (["--nproc", "1,1"], "--nproc must list increasing positive process counts"),
    (["--nproc", "1,two"], "--nproc must be comma-separated process counts such as 1,2,4, got '1,two'"),
    (["--nproc", "1,2", "--repeats", "0"], "--repeats must be at least 1, got 0"),
    (["--nproc", "1,4", "--cpu-threads", "2"], "--cpu-threads 2 cannot give each of 4 processes a thread"),
    (["--nproc", "1,2", "--", "--seed", "3"], "--seed is set by this command"),
    (["--nproc", "1,2", "--", "--nproc", "3"], "--nproc is set by this command"),
    (["--nproc", "1,2", "--", "--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
])
def test_bad_input_is_one_line_naming_the_problem(tmp_path, argv, problem):
    with pytest.raises(UsageError) as raised:
        run_command(["scale", "gpt3-tiny", "--out", str(tmp_path / "s"), *argv])
    assert problem in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "s").exists()


def test_the_command_runs_the_sweep_and_saves_it(tmp_path, monkeypatch, capsys):
    runner = FakeRunner(SIZES)
    monkeypatch.setattr(sweep, "subprocess_runner", runner)
    assert run_command(["scale", "gpt3-tiny", "--nproc", "1,2,4", "--repeats", "2", "--seed", "3",
                        "--out", str(tmp_path / "s"), "--", "--max-samples", "64"]) == 0
    assert len(runner.calls) == 6 and runner.calls[0][0][-2:] == ["--max-samples", "64"]
    out = capsys.readouterr().out
    assert "seeds 3..4" in out and "scaling-gpt3-tiny.json" in out
    assert json.loads((tmp_path / "s" / "scaling-gpt3-tiny.json").read_text())["repeats"] == 2


def _system(tree, name: str, **fields) -> None:
    (tree / "systems").mkdir(parents=True, exist_ok=True)
    (tree / "systems" / f"{name}.json").write_text(json.dumps(fields))


def test_efficiency_divides_by_the_cores_the_runs_actually_used(tmp_path):
    # 1 process x 2 threads and 2 processes x 1 thread on a 2-core machine: the same hardware
    result = sweep.run_sweep(plan(tmp_path, sizes=(1, 2)), FakeRunner(SIZES))
    for nproc, threads in ((1, 2), (2, 1)):
        _system(tmp_path / "sweep" / f"nproc-{nproc}", f"host_cpux{nproc}", accelerator_model_name="",
                hw_notes=f"torch intra-op threads: {threads}", host_processor_vcpu_count="2")
    runs = [sweep.measure(Path(r.log), r.nproc, r.repeat, r.seed) for r in result.runs]
    assert [(r.hardware, r.hardware_unit) for r in runs] == [(2.0, sweep.CORES), (2.0, sweep.CORES)]
    one, two = sweep.summarize(runs)
    assert two.throughput_efficiency == pytest.approx(two.units_per_s / one.units_per_s)  # no growth: the ratio
    result.runs[:] = runs
    console = Console(file=io.StringIO(), width=240)
    print_table(result, console, unit="tokens")
    text = console.file.getvalue()
    assert "2 cores" in text and "the growth in CPU cores in use" in text


def test_accelerators_count_one_per_process_and_unknown_hardware_counts_processes(tmp_path):
    log = tmp_path / "results" / "node_h200x4" / "gpt3-tiny" / "result_0.txt"
    _system(tmp_path, "node_h200x4", accelerator_model_name="NVIDIA H200", hw_notes="torch intra-op threads: 8")
    assert sweep.hardware_in_use(log, 4) == (4.0, "accelerators")
    assert sweep.hardware_in_use(tmp_path / "results" / "other" / "b" / "result_0.txt", 4) == (4.0, "processes")
    _system(tmp_path, "big_cpux8", hw_notes="torch intra-op threads: 4", host_processor_vcpu_count="16")
    assert sweep.hardware_in_use(tmp_path / "results" / "big_cpux8" / "b" / "result_0.txt", 8) == (16.0, sweep.CORES)
    (tmp_path / "systems" / "broken.json").write_text("{not json")
    assert sweep.hardware_in_use(tmp_path / "results" / "broken" / "b" / "result_0.txt", 2) == (2.0, "processes")
