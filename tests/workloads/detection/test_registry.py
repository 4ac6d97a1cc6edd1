"""One package may register several benchmarks through WORKLOADS (detection: ssd and maskrcnn),
while WORKLOAD keeps working for the others."""

from __future__ import annotations

from trainclock.workload import registry


def test_a_package_exposing_workloads_registers_each():
    keys = [w.key for w in registry.workloads()]
    assert "ssd" in keys and "maskrcnn" in keys and "resnet" in keys and "gpt3" in keys
    assert registry.find("ssd") == (registry.find("retinanet-tiny")[0], "retinanet-resnext50")
    assert registry.find("maskrcnn")[1] == "maskrcnn-r50"
