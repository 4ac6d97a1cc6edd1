"""What every trainclock process pays to find its benchmark: the registry imports every built-in
benchmark package, so they import their heavy libraries only where a model, metric or scheduler is
built. Resolving every member leaves these out of the process (each takes half a second or more to
import, and the suite starts hundreds of processes): with them, finding the benchmarks took 3.4 s
of a process's start, without 2.2 s (2-core Xeon VM, quiet). A member's shape lives apart from the
module that builds its network from torchvision (detection/shape.py, resnet/shape.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from trainclock.workload.registry import PLUGINS_ENV

KEPT_OUT = ("transformers", "diffusers", "torchmetrics", "torch.distributed.pipelining", "scipy", "matplotlib",
            "torchvision", "torch._dynamo", "torch.distributed.tensor", "torch.distributed.fsdp")

PROBE = """
import sys
from trainclock.workload import registry
names = [n for w in registry.workloads() for n in w.member_names()]
for name in names:
    assert registry.find(name)[1] == name, name
for workload in registry.workloads():
    registry.find(workload.key)
print(",".join(names))
print(",".join(m for m in {kept_out!r} if m in sys.modules))
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != PLUGINS_ENV}  # built-in benchmarks only
    return {**env, **extra}


def probe() -> tuple[list[str], str]:
    """(every built-in member's name, the modules of KEPT_OUT imported once all were resolved)."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(kept_out=KEPT_OUT)], capture_output=True, text=True,
                         timeout=300, env=clean_env())
    assert out.returncode == 0, out.stderr
    names, imported = out.stdout.split("\n")[:2]
    return names.split(","), imported


def test_resolving_every_member_imports_no_heavy_library():
    names, imported = probe()
    assert len(names) > 20 and "sd-tiny" in names and "bert-tiny" in names  # every benchmark's members
    assert imported == "", f"imported while resolving members: {imported}"


def test_list_still_shows_every_member():
    out = subprocess.run([sys.executable, "-m", "trainclock.cli", "list"], capture_output=True, text=True,
                         timeout=300, env=clean_env(COLUMNS="400"))
    assert out.returncode == 0, out.stderr
    names, _ = probe()
    missing = [name for name in names if name not in out.stdout]
    assert not missing, out.stdout
