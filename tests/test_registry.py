"""The registry without one benchmark's third-party dependency: the others still register, the
missing one is named with what it needs, and a user's module's missing dependency stays an error."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import sys
sys.modules["diffusers"] = None  # as if diffusers were not installed: importing it raises ModuleNotFoundError
from trainclock.workload import registry
print(sorted(w.key for w in registry.workloads()))
print(registry.unavailable())
"""


def probe(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_a_benchmark_whose_dependency_is_missing_is_left_out_and_named():
    out = probe(PROBE)
    assert out.returncode == 0, out.stderr
    keys, missing = out.stdout.strip().splitlines()
    assert "stable_diffusion" not in keys and "gpt3" in keys and "rnnt" in keys
    assert missing == "{'stable_diffusion': 'diffusers'}"


def test_asking_for_the_left_out_benchmark_says_what_it_needs():
    out = probe(PROBE + "registry.find('sd-tiny')\n")
    assert "sd-tiny" in out.stderr and "stable_diffusion is left out: it needs diffusers" in out.stderr


def test_a_users_module_with_a_missing_dependency_is_still_an_error(tmp_path):
    (tmp_path / "my_bench.py").write_text("import not_a_real_package_xyz\n")
    out = probe("from trainclock.workload import registry\nregistry.workloads()\n",
                TRAINCLOCK_WORKLOADS="my_bench", PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    assert out.returncode != 0 and "cannot import workload module 'my_bench'" in out.stderr


def test_a_users_module_declaring_a_missing_requirement_is_an_error_saying_what_to_do(tmp_path):
    (tmp_path / "my_declaring_bench.py").write_text('REQUIRES = ("not_a_real_package_xyz",)\n')
    out = probe("from trainclock.workload import registry\nregistry.workloads()\n",
                TRAINCLOCK_WORKLOADS="my_declaring_bench",
                PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    assert out.returncode != 0
    assert "'my_declaring_bench' needs not_a_real_package_xyz, which is not installed; install it" in out.stderr
    assert "TRAINCLOCK_WORKLOADS" in out.stderr
