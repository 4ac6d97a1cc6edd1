"""Finds the benchmarks. Each subpackage of trainclock.workloads that exposes WORKLOAD (or
WORKLOADS, a sequence: one package holding several benchmarks that share a model family) joins,
as does every module named in $TRAINCLOCK_WORKLOADS (comma-separated import paths: a user's own
benchmark, or the tests' toy workload) and every `trainclock.workloads` entry point. Commands ask
this module, never a benchmark by name. A built-in benchmark whose third-party dependency is not
installed is left out and named by `unavailable()` (a bare GPU machine may lack, say, diffusers:
the other benchmarks still run); a missing dependency of a user's module stays an error.

Every command imports every benchmark package, so a package imports its heavy dependencies
(transformers, diffusers, torchmetrics, ...) only where a model, metric or scheduler is built, and
declares them in its `__init__.py` as REQUIRES, the top-level modules it needs: the registry checks
them (importlib.util.find_spec) before it reads the package's workloads. A dependency a package
still imports at module level is caught as before, by its ModuleNotFoundError."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from functools import cache
from importlib.metadata import entry_points

from trainclock.errors import UsageError
from trainclock.workload.base import Member, Workload

PLUGINS_ENV = "TRAINCLOCK_WORKLOADS"


def workloads() -> list[Workload]:
    """Every registered workload, built-in ones first, in a stable order."""
    return list(_registered(os.environ.get(PLUGINS_ENV, "")).values())


def unavailable() -> dict[str, str]:
    """Built-in benchmark packages left out: package name -> the module it could not import."""
    _registered(os.environ.get(PLUGINS_ENV, ""))
    return dict(_UNAVAILABLE)


def find(name: str) -> tuple[Workload, str]:
    """The workload and member a name means: a member (<benchmark>-<size>) or an MLPerf key
    alone (meaning its full-size member)."""
    for workload in workloads():
        if name == workload.key:
            return workload, workload.full_size
        if name in _member_names(workload):
            return workload, name
    known = ", ".join(n for w in workloads() for n in _member_names(w))
    missing = "".join(f"; {package} is left out: it needs {module}, not installed (./scripts/install.sh)"
                      for package, module in unavailable().items())
    raise UsageError(f"unknown benchmark {name!r}; choose one of: {known} (or an MLPerf key alone for the full "
                     f"size){missing}")


def member(name: str) -> tuple[Workload, Member]:
    workload, member_name = find(name)
    return workload, next(m for m in workload.members() if m.name == member_name)


def _member_names(workload: Workload) -> list[str]:
    """The workload's member names, without building its members: a Member counts its model's
    parameters, which may build the model (on the meta device) and import its library."""
    names = getattr(workload, "member_names", None)  # BenchmarkWorkload's; a plugin on the bare protocol may lack it
    return list(names()) if names is not None else [m.name for m in workload.members()]


def default_member() -> str:
    """The member a command means when the user names none: the one a registered workload declares
    in its `default_member`. Where none (or more than one) declares it, the user must name one."""
    # BenchmarkWorkload.default_member; a plugin workload on the bare protocol need not have it
    declared = [(workload, name) for workload in workloads()
                if (name := getattr(workload, "default_member", None))]
    if not declared:
        raise UsageError("no benchmark declares a default member: name one, e.g. `trainclock data prepare "
                         f"{_example_member()}` (see `trainclock list`)")
    if len(declared) > 1:
        claims = ", ".join(f"{workload.key}: {name}" for workload, name in declared)
        raise UsageError(f"several benchmarks declare a default member ({claims}); name the member to prepare")
    workload, name = declared[0]
    if name not in _member_names(workload):
        raise UsageError(f"{workload.key} declares {name!r} as the default member, but has no such member; "
                         "name the member to prepare (see `trainclock list`)")
    return name


def _example_member() -> str:
    """A real member name for a message: the first registered workload's smallest member."""
    for workload in workloads():
        names = _member_names(workload)
        if names:
            return names[0]
    return "MEMBER"


_UNAVAILABLE: dict[str, str] = {}


@cache
def _registered(plugins: str) -> dict[str, Workload]:
    found: dict[str, Workload] = {}
    package = importlib.import_module("trainclock.workloads")
    built_in = [f"trainclock.workloads.{info.name}" for info in pkgutil.iter_modules(package.__path__) if info.ispkg]
    modules = built_in + [m.strip() for m in plugins.split(",") if m.strip()]
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            third_party = isinstance(e, ModuleNotFoundError) and e.name and not e.name.startswith("trainclock")
            if module_name in built_in and third_party:
                _UNAVAILABLE[module_name.rsplit(".", 1)[1]] = e.name.split(".")[0]
                continue
            raise UsageError(f"cannot import workload module {module_name!r} ({e}); fix ${PLUGINS_ENV}") from None
        missing = _missing_requirement(module)
        if missing is not None:
            if module_name in built_in:
                _UNAVAILABLE[module_name.rsplit(".", 1)[1]] = missing
                continue
            raise UsageError(f"workload module {module_name!r} needs {missing}, which is not installed; install it "
                             f"(pip install into .venv) or take the module out of ${PLUGINS_ENV}")
        several = getattr(module, "WORKLOADS", None)
        if several is not None:
            for workload in several:
                _add(found, workload, module_name)
        else:
            _add(found, getattr(module, "WORKLOAD", None), module_name)
    for entry in entry_points(group="trainclock.workloads"):
        _add(found, entry.load(), entry.value)
    return found


def _missing_requirement(module) -> str | None:
    """The first module of the package's REQUIRES that is not installed (None: all are)."""
    for name in getattr(module, "REQUIRES", ()):
        try:
            if importlib.util.find_spec(name) is None:  # None also where sys.modules[name] is None
                return name
        except (ImportError, ValueError):  # a parent package missing, or a module without a spec
            return name
    return None


def _add(found: dict[str, Workload], workload: Workload | None, origin: str) -> None:
    if workload is None:
        if not origin.startswith("trainclock.workloads."):
            raise UsageError(f"workload module {origin!r} defines no WORKLOAD (or WORKLOADS)")
        return
    if workload.key in found and found[workload.key] is not workload:
        raise UsageError(f"two workloads claim the MLPerf key {workload.key!r} ({origin})")
    found[workload.key] = workload
