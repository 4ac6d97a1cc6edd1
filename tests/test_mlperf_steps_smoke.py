"""benchmarks/mlperf_steps_gpu.py, the one-GPU step timing of every benchmark's full size, kept from
rotting without a GPU: its --cpu-smoke mode runs the same code path (made-up or default data, job on
meta, model on the device, the loop's train_step) on each benchmark's -tiny tier on CPU; its cuts
of the sizes one GPU cannot hold are checked against the workloads' own memory estimates."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import math
import subprocess
import sys

import pytest
import torch

from tests.workloads.helpers import ROOT, environment
from trainclock.distributed.layout import Layout
from trainclock.workload import registry
from trainclock.workload.base import RunSettings

SCRIPT = ROOT / "benchmarks" / "mlperf_steps_gpu.py"
H100_BYTES = 80 * 10**9


def script_module():
    spec = importlib.util.spec_from_file_location("mlperf_steps_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["mlperf_steps_gpu"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_cpu_smoke_steps_every_benchmarks_tiny_tier(tmp_path):
    out = tmp_path / "steps.json"
    # the tiers' default data, prepared once in the real data home as the tier tests use it
    done = subprocess.run([sys.executable, str(SCRIPT), "--cpu-smoke", "--json", str(out)], capture_output=True,
                          text=True, timeout=600, env=environment(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    rows = {row["benchmark"]: row for row in report["rows"]}
    assert set(rows) == {w.key for w in registry.workloads()}
    for key, row in rows.items():
        assert row["status"] == "ok", (key, row.get("error"), done.stderr[-3000:])
        assert row["member"].endswith("-tiny") and row["steps_timed"] >= 1
        assert row["samples_per_s"] > 0 and row["units_per_s"] >= row["samples_per_s"], row
        assert math.isfinite(row["loss"]), row
        assert row["forward_backward_ms"] > 0 and row["optimizer_ms"] > 0, row
        assert "cut" not in row and row["flops_kept"] == 1.0  # a tier fits: nothing is cut or scaled
    assert report["peak_flops"] > 0 and report["mode"] == "cpu-smoke"


def test_the_script_imports_only_torch_trainclock_and_the_standard_library():
    tree = ast.parse(SCRIPT.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    # published_rates is the benchmarks' own module beside it (imported only where shared/ is)
    assert imported - set(sys.stdlib_module_names) <= {"torch", "trainclock", "published_rates"}


def test_every_override_names_a_registered_benchmark():
    assert set(script_module().OVERRIDES) <= {w.key for w in registry.workloads()}


@pytest.mark.parametrize("key", ["gpt3", "dlrm_dcnv2"])
def test_the_cuts_fit_a_full_size_on_one_80gb_gpu_and_leave_the_tiers_whole(key):
    module = script_module()
    workload = next(w for w in registry.workloads() if w.key == key)
    cut = module.OVERRIDES[key]
    budget = int(module.MEMORY_FRACTION * H100_BYTES)
    full = workload.resolve(workload.full_size, RunSettings(), Layout(), torch.device("meta"))
    smaller, note = cut.apply(full, budget)
    assert note and smaller != full
    if key == "gpt3":  # the workload's own estimate of weights, gradients, Adam states and activations
        assert 1 <= smaller.shape.n_layer < full.shape.n_layer and smaller.training_memory_bytes() <= budget
        assert dataclasses.replace(smaller, shape=dataclasses.replace(
            smaller.shape, n_layer=smaller.shape.n_layer + 1)).training_memory_bytes() > budget  # the most that fit
    else:  # fp32 weights, gradients and Adagrad state of one GPU's share of the tables
        assert smaller.shape.parameter_count() * 12 <= budget
        assert sum(smaller.shape.rows) * module.GPUS_PER_NODE >= sum(full.shape.rows)
    tier = next(m.name for m in workload.members() if m.name.endswith("-tiny"))
    tiny = workload.resolve(tier, RunSettings(), Layout(), torch.device("meta"))
    assert cut.apply(tiny, budget) == (tiny, None)


def test_a_step_too_long_for_the_budget_runs_fewer_micro_batches_and_says_so(tmp_path):
    module = script_module()
    workload, member = registry.find("gpt3-tiny")
    settings = module.default_settings(workload, workload.write_sample_data(member, tmp_path, samples=64, seed=0))
    spec = workload.resolve(member, settings, Layout(), module.META)
    job = workload.build_job(spec, module.single_process(), module.META, module.SEED, settings)
    cpu = torch.device("cpu")
    job = dataclasses.replace(job, model=workload.build_model(spec, module.single_process(), cpu, settings))
    batches = [job.batches.to(job.batch(0, slice(0, 8)), cpu)]
    options = module.TrainOptions(device=cpu, precision="fp32")
    steps = module.run_steps(job, batches, rows=8, micro=2, options=options, budget_s=1e-6, warmup=1, max_steps=3)
    assert steps.rows == 2 and steps.steps == 1 and math.isfinite(steps.loss)
    assert steps.cut_micro_batches.startswith("1 of 4 micro-batches per step (2 of 8 rows)")
    assert steps.regions[module.FORWARD_BACKWARD] > 0 and steps.regions[module.OPTIMIZER] > 0
