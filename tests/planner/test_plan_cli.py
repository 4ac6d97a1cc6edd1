import argparse
import csv
import json
import shutil

import pytest

from trainclock.commands import plan
from trainclock.errors import DataError, UsageError
from trainclock.planner.model.hardware import load_catalogue
from trainclock.planner.model.parallel_plan import parse_layout
from trainclock.planner.model.workload_view import cost_model
from trainclock.planner.plan import Planner


@pytest.fixture
def run(mlperf_dir, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps to the terminal width

    def run(*argv: str) -> tuple[int, str]:
        parser = argparse.ArgumentParser(prog="trainclock")
        plan.register(parser.add_subparsers(required=True))
        args = parser.parse_args(["plan", *argv, "--mlperf-results", str(mlperf_dir)])
        code = args.func(args)
        return code, capsys.readouterr().out

    return run


def test_plan_of_the_published_3584_gpu_system(run, mlperf_dir):
    argv = ["gpt3-175b", "--accelerator", "h100-sxm", "--count", "3584", "--gbs", "2688",
            "--layout", "tp=4,pp=8,vp=12", "--stack", "h100-sxm/v3.0", "--price", "37000/node-month"]
    code, out = run(*argv)
    planner = Planner(cost_model("gpt3-175b"), load_catalogue(), mlperf_dir)
    h100 = planner.catalogue["h100-sxm"]
    calibrated = planner.calibrated(h100, "h100-sxm/v3.0")
    expected, _ = planner.plan(h100, 3584, calibrated, parse_layout("tp=4,pp=8,vp=12"), 2688)
    minutes = expected.time_to_train_s / 60
    assert code == 0
    assert f"{minutes:,.2f} min" in out
    assert minutes == pytest.approx(10.94, rel=0.10)  # the published score of this very system
    assert "tp=4,pp=8,dp=112,vp=12,mb=1,sp=on,recompute=selective,zero=1,overlap=on,gather=off,precision=fp8" in out
    # the RCPs' mean at 2,688, between 2,048 (1,182,793,728 tokens) and 3,072 (1,216,348,160):
    # 1,203,765,248 tokens = 218.67 steps of 2,688 x 2,048 -> 219 steps = 1,205,600,256 tokens, not
    # rounded up again to the evaluation every 10 steps (220); 588,672 / 26,880 samples = 21.9 -> 22
    assert "1,205,600,256 (MLPerf RCPs" in out and "219 steps" in out and "22 evaluations" in out
    for part in ("matmul compute", "tensor-parallel collectives", "pipeline bubble", "data-parallel sync",
                 "optimizer update", "optimizer states", "activations", "fits", "per result (3 runs", "kWh"):
        assert part in out, part


def test_sweep_prints_and_saves_the_scaling_curve(run, tmp_path):
    path = tmp_path / "curve.json"
    code, out = run("gpt3-175b", "--accelerator", "h100-sxm", "--sweep", "3584,512,10752", "--gbs", "2688",
                    "--price", "2.5/gpu-hour", "--save", str(path))
    assert code == 0 and f"saved to {path}" in out
    saved = json.loads(path.read_text())
    points = saved["points"]
    assert [p["accelerators"] for p in points] == [512, 3584, 10752]
    assert points[0]["speedup"] == 1.0 and points[0]["time_to_train_efficiency"] == 1.0
    assert points[0]["time_to_train_min"] > points[1]["time_to_train_min"] > points[2]["time_to_train_min"]
    for p in points:
        assert p["time_to_train_efficiency"] == pytest.approx(p["speedup"] / (p["accelerators"] / 512))
        assert p["cost_per_run"] == pytest.approx(p["accelerator_hours"] * 2.5)
        assert f"{p['time_to_train_min']:,.2f}" in out
    assert saved["member"] == "gpt3-175b" and saved["calibration"].startswith("h100-sxm/v3.1")

    csv_path = tmp_path / "curve.csv"
    run("gpt3-175b", "--accelerator", "h100-sxm", "--sweep", "512,1024", "--gbs", "2048", "--save", str(csv_path))
    rows = list(csv.DictReader(csv_path.open()))
    assert [int(r["accelerators"]) for r in rows] == [512, 1024] and float(rows[1]["speedup"]) > 1.5


def test_validate_prints_the_tables_and_exits_by_the_goal(run, report):
    code, out = run("--validate")
    assert code == (0 if report.meets_goal else 1)
    for title in ("calibration: per software stack", "leave-one-out", "extrapolation", "projection beyond the table",
                  "result logs against the model", "part by part", "the goal: mean <= 3%"):
        assert title in out, title


@pytest.mark.parametrize("argv, error, message", [
    (["gpt3-175b", "--accelerator", "h300", "--count", "8"], UsageError, "unknown accelerator 'h300'"),
    (["gpt3-175b", "--accelerator", "h100-sxm"], UsageError, "give either --count N or --sweep"),
    (["gpt3-175b", "--accelerator", "h100-sxm", "--count", "8", "--save", "x.json"], UsageError, "use it with --sweep"),
    (["--accelerator", "h100-sxm", "--count", "8"], UsageError, "name a benchmark member"),
    (["gpt3-999b", "--accelerator", "h100-sxm", "--count", "8"], UsageError, "unknown benchmark 'gpt3-999b'"),
    (["gpt3-175b", "--count", "8"], UsageError, "--accelerator is required"),
    (["gpt3-175b", "--accelerator", "h100-sxm", "--count", "8", "--efficiency", "1.5"], UsageError, "in \\(0, 1\\]"),
    (["gpt3-175b", "--accelerator", "a100-80gb", "--count", "1024"], UsageError, "a100-80gb has no calibration"),
    (["gpt3-175b", "--accelerator", "h100-sxm", "--count", "3584", "--stack", "x/v9"], UsageError, "unknown --stack"),
    (["gpt3-175b", "--accelerator", "h100-sxm", "--sweep", "512,x"], UsageError, "--sweep '512,x'"),
    (["gpt3-175b", "--accelerator", "h100-sxm", "--sweep", "512", "--save", "c.txt"], UsageError, "name a .json or .csv"),
])
def test_bad_input_is_a_one_line_error(run, argv, error, message):
    with pytest.raises(error, match=message) as info:
        run(*argv)
    assert "\n" not in str(info.value)


def test_bad_hardware_file_is_a_data_error(run, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[x]\nname = "X"\n')
    with pytest.raises(DataError, match=r"mine.toml: \[x\] is missing peak_tflops"):
        run("gpt3-175b", "--accelerator", "x", "--count", "8", "--hardware", str(path))


def test_a_binary_hardware_file_is_a_one_line_error(run, tmp_path):
    path = tmp_path / "catalogue.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(DataError, match=rf"hardware file {path} is not UTF-8 text") as info:
        run("gpt3-175b", "--accelerator", "h100-sxm", "--count", "8", "--hardware", str(path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("argv", [["gpt3-175b", "--accelerator", "h100-sxm", "--count", "3584"], ["--validate"]])
def test_a_binary_calibration_csv_is_a_one_line_error(mlperf_dir, tmp_path, argv):
    folder = tmp_path / "mlperf-results"
    shutil.copytree(mlperf_dir, folder, ignore=shutil.ignore_patterns("v3.*"))
    (folder / "gpt3_results_calibration.csv").write_bytes(b"round,submitter\n" + bytes(range(128, 256)) * 8)
    parser = argparse.ArgumentParser(prog="trainclock")
    plan.register(parser.add_subparsers(required=True))
    args = parser.parse_args(["plan", *argv, "--mlperf-results", str(folder)])
    with pytest.raises(DataError, match=rf"{folder / 'gpt3_results_calibration.csv'} is not UTF-8 text") as info:
        args.func(args)
    assert "\n" not in str(info.value)


def test_layout_that_does_not_fit_is_shown_with_its_numbers(run):
    code, out = run("gpt3-175b", "--accelerator", "h100-sxm", "--count", "512", "--gbs", "2048",
                    "--layout", "tp=1,pp=8")
    assert code == 0
    assert "does not fit in memory" in out and "DOES NOT FIT" in out and "of 72.00 usable" in out
