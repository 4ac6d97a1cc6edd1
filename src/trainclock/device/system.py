"""The system description (MLPerf's systems/<system>.json fields), detected from this machine."""

from __future__ import annotations

import os
import platform
import re
import socket
from pathlib import Path

import torch


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# what sets a CPU's matmul speed beyond its name: one "Intel Xeon" name covers AMX machines and
# machines without bf16 instructions, whose bf16 peaks differ 5-fold
SPEED_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512f", "avx2", "fma")


def cpu_identity() -> str:
    """This CPU as runs timed on it compare: name, the flags that set its matmul speed, vCPUs."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    found = " ".join(f for f in SPEED_FLAGS if f in flags) or "flags unknown"
    return f"{cpu_model()} [{found}], {os.cpu_count()} vCPUs"


def _memory_gb() -> str:
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        return f"{kib / 1024**2:.0f} GB"
    except (OSError, AttributeError):
        return ""


def _os_name() -> str:
    try:
        return re.search(r'PRETTY_NAME="([^"]+)"', Path("/etc/os-release").read_text()).group(1)
    except (OSError, AttributeError):
        return platform.platform()


def default_system_name(device: torch.device, nodes: int = 1, per_node: int = 1) -> str:
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname().split(".")[0]) or "host"
    kind = "cpu" if device.type == "cpu" else re.sub(r"\W+", "-", torch.cuda.get_device_name(device)).strip("-").lower()
    return f"{host}_{kind}x{nodes * per_node}"


def describe(system_name: str, device: torch.device, org: str, division: str, status: str,
             nodes: int = 1, accelerators_per_node: int = 1) -> dict[str, str]:
    threads = torch.get_num_threads()
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        accel_name, accel_mem = props.name, f"{props.total_memory / 1024**3:.0f} GB"
    else:
        accel_name, accel_mem, accelerators_per_node = "", "", 0
    return {
        "submitter": org,
        "division": division,
        "status": {"onprem": "Available on premise", "cloud": "Available cloud"}.get(status, status),
        "system_name": system_name,
        "number_of_nodes": str(nodes),
        "host_processors_per_node": "1",
        "host_processor_model_name": cpu_model(),
        "host_processor_core_count": str(os.cpu_count() or ""),
        "host_processor_vcpu_count": str(os.cpu_count() or ""),
        "host_processor_frequency": "",
        "host_processor_caches": "",
        "host_processor_interconnect": "",
        "host_memory_capacity": _memory_gb(),
        "host_memory_configuration": "",
        "host_storage_type": "",
        "host_storage_capacity": "",
        "host_networking": "",
        "host_networking_topology": "",
        "accelerators_per_node": str(accelerators_per_node),
        "accelerator_model_name": accel_name,
        "accelerator_host_interconnect": "",
        "accelerator_frequency": "",
        "accelerator_on-chip_memories": "",
        "accelerator_memory_configuration": "",
        "accelerator_memory_capacity": accel_mem,
        "accelerator_interconnect": "",
        "accelerator_interconnect_topology": "",
        "cooling": "",
        "hw_notes": f"torch intra-op threads: {threads}",
        "framework": f"PyTorch {torch.__version__}",
        "other_software_stack": f"Python {platform.python_version()}, trainclock",
        "operating_system": _os_name(),
        "sw_notes": "",
    }
