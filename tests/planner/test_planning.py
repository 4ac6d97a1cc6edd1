import pytest

from trainclock.errors import DataError, UsageError
from trainclock.planner.calibration import Calibrated, own_runs
from trainclock.planner.model import hardware
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.step_time import Efficiency
from trainclock.planner.model.workload_view import cost_model
from trainclock.planner.plan import Planner
from trainclock.workloads.gpt3 import cost as gpt3_cost

from .helpers import accelerator


def test_h200_borrows_the_h100_calibration_and_keeps_its_own_memory(catalogue, mlperf_dir):
    planner = Planner(cost_model("gpt3-175b"), catalogue, mlperf_dir)
    h200, h100 = catalogue["h200"], catalogue["h100-sxm"]
    borrowed, own = planner.calibrated(h200), planner.calibrated(h100)
    assert borrowed.efficiency == own.efficiency and "borrowed from h100-sxm" in borrowed.source
    p200, _ = planner.plan(h200, 512, borrowed, {"tp": 4, "pp": 8, "vp": 12}, 2048)
    p100, _ = planner.plan(h100, 512, own, {"tp": 4, "pp": 8, "vp": 12}, 2048)
    assert p200.memory.capacity == 141e9 and p200.memory.total == p100.memory.total
    assert p200.time_to_train_s < p100.time_to_train_s  # same compute, faster memory for the optimizer


def test_this_cpu_uses_trainclocks_own_reference_runs(monkeypatch):
    runs = [{"mfu": 0.2}, {"mfu": 0.3}, {"mfu": 0.35}]
    monkeypatch.setattr(gpt3_cost, "target_evidence", lambda name: {"runs": runs})
    cpu = accelerator(id=hardware.THIS_CPU, accelerators_per_node=1, inter_node_bandwidth=0.0)
    calibrated = Planner(cost_model("gpt3-mini"), {}).calibrated(cpu)
    assert calibrated.efficiency.compute == 0.3  # the median of the member's reference runs
    assert (calibrated.template.zero, calibrated.template.overlap) == (own_runs.CPU_LAYOUT["zero"], False)
    assert "gpt3-mini reference runs" in calibrated.source


def test_this_cpu_prefers_the_members_full_runs_to_the_target(monkeypatch):
    evidence = {"runs": [{"mfu": 0.1}], "verification": {"runs": [{"mfu": 0.5}, {"mfu": 0.54}, {"mfu": 0.52}]}}
    monkeypatch.setattr(gpt3_cost, "target_evidence", lambda name: evidence)
    cpu = accelerator(id=hardware.THIS_CPU, accelerators_per_node=1, inter_node_bandwidth=0.0)
    calibrated = Planner(cost_model("gpt3-mini"), {}).calibrated(cpu)
    assert calibrated.efficiency.compute == 0.52 and "3 gpt3-mini verification runs" in calibrated.source


def test_this_cpu_is_measured():
    cpu = hardware.this_cpu()
    # a CPU without bf16 instructions multiplies bf16 through a scalar fallback near 1 GFLOP/s
    assert cpu.peak("bf16") > 1e8 and cpu.peak("fp32") > 1e9 and cpu.memory_bandwidth > 1e8
    assert (cpu.accelerators_per_node, cpu.inter_node_bandwidth) == (1, 0.0)
    with pytest.raises(UsageError, match="this-cpu has no inter-node network in the catalogue, so at most 1"):
        Planner(cost_model("gpt3-mini"), {}).plan(cpu, 2, Calibrated(Efficiency(0.3), Plan(), ""), {})


def test_this_cpu_without_recorded_runs_asks_for_an_efficiency(monkeypatch):
    monkeypatch.setattr(gpt3_cost, "target_evidence", lambda name: {"runs": []})
    cpu = accelerator(id=hardware.THIS_CPU, accelerators_per_node=1, inter_node_bandwidth=0.0)
    with pytest.raises(DataError, match="no trainclock run of gpt3-mini .* records an MFU; give --efficiency F"):
        Planner(cost_model("gpt3-mini"), {}).calibrated(cpu)
