"""The import graph keeps the design's direction (shared/DESIGN.md, "Dependencies point downward
only"): a benchmark is known by name only inside its own folder, the generic packages never import
the layers above them, and no two modules import each other, directly or in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "trainclock"
WORKLOADS = sorted(p.name for p in (SRC / "workloads").iterdir() if (p / "__init__.py").exists())

# package -> the trainclock packages it must never import (at any depth of the module)
FORBIDDEN = {
    "mllog": {"*"},
    "device": {"train", "workloads", "review", "results", "report", "planner", "commands", "distributed"},
    "optim": {"train", "workloads", "review", "results", "report", "planner", "commands"},
    "distributed": {"train", "workloads", "review", "results", "report", "planner", "commands"},
    "workload": {"workloads", "train", "review", "results", "report", "planner", "commands", "sweep"},
    "datasets": {"workload", "workloads", "train", "review", "results", "report", "planner", "commands", "sweep"},
    "workloads": {"train", "review", "results", "report", "commands", "sweep"},
    "train": {"review", "results", "report", "planner", "commands", "sweep"},
    "review": {"train", "workloads", "results", "report", "planner", "commands", "distributed"},
    "results": {"train", "workloads", "report", "planner", "commands", "distributed"},
    "report": {"train", "commands", "distributed"},
    "planner": {"train", "review.tree", "results", "report", "commands"},
}


def modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(("trainclock", *parts)).removesuffix(".__init__")
        found[name] = path
    return found


def imports(path: Path) -> set[str]:
    """Every trainclock module a file imports, at top level or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("trainclock")}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_a_benchmark_is_imported_only_from_its_own_folder():
    assert "gpt3" in WORKLOADS
    offenders = []
    for module, path in modules().items():
        for name in imports(path):
            for workload in WORKLOADS:
                prefix = f"trainclock.workloads.{workload}"
                if (name == prefix or name.startswith(prefix + ".")) and not module.startswith(prefix):
                    offenders.append(f"{module} imports {name}")
    assert not offenders, "only workloads/<name>/ may import its benchmark:\n" + "\n".join(offenders)


def test_the_benchmarks_package_holds_benchmark_folders_only():
    """A folder under workloads/ is a benchmark: the generic interface lives in workload/, data
    several benchmarks share in datasets/."""
    loose = sorted(p.name for p in (SRC / "workloads").iterdir()
                   if p.name not in {"__init__.py", "__pycache__"} and not (p / "__init__.py").exists())
    assert not loose, f"workloads/ holds more than benchmark folders: {loose}"


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_dependencies_point_downward(package):
    offenders = []
    for module, path in modules().items():
        if package_of(module) != package:
            continue
        for name in imports(path):
            target = name.split(".", 1)[1] if "." in name else ""
            if any(f == "*" and package_of(name) != package or target == f or target.startswith(f + ".")
                   for f in FORBIDDEN[package]):
                offenders.append(f"{module} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_no_import_cycles_between_modules():
    graph = {module: {n for n in imports(path) if n in modules() and n != module} for module, path in modules().items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt.startswith(node + "."):  # a package importing its own submodule
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]) if nxt in stack else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)
