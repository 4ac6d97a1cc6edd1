"""Scoring facts that mlperf_logging keeps in its code rather than in data, read from that code
(its syntax tree, never run): which benchmarks' convergence point is eval_accuracy's samples_count,
which benchmarks converge at their first passing evaluation and in which rulesets that evaluation
is keyed by step_num, and how many runs the summarizer drops. The benchmarks are found by the
shape of the code (the branch that reads each key), so trainclock names none of them. A package
whose code no longer has these shapes is a clear error, caught by tests/review, not a silent
guess."""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import DataError


@dataclass(frozen=True)
class OfficialCode:
    samples_count_benchmarks: frozenset[str]  # rcp_checker reads their samples_count, unrounded
    first_pass_benchmarks: frozenset[str]  # it reads the first evaluation that passes, not the last
    step_num_rulesets: frozenset[str]  # where that evaluation is keyed by step_num (else samples_count)
    drops: dict[str, int]  # the summarizer's max_dropped_scores where it is not the default
    default_drop: int


@functools.cache
def official_code() -> OfficialCode:
    return read_official_code(_function("mlperf_logging.rcp_checker.rcp_checker", "read_submission_file"),
                              _function("mlperf_logging.result_summarizer.result_summarizer",
                                        "_compute_strong_score_standalone"))


def read_official_code(reader: ast.AST, summarizer: ast.AST) -> OfficialCode:
    """The facts of rcp_checker.read_submission_file's and the summarizer's syntax trees: the
    benchmarks of the branch that subscripts ["samples_count"], those of the branch that picks
    "step_num" by ruleset, and that pick's rulesets."""
    samples = _benchmarks_of(_branch(reader, _subscripts("samples_count")),
                             "the benchmarks read by samples_count (a branch on `benchmark` reading "
                             "[\"samples_count\"])")
    step_num = _ifexp(reader, "step_num")
    first_pass = _benchmarks_of(_branch(reader, lambda node: node is step_num),
                                "the benchmarks read at their first passing evaluation (a branch on `benchmark` "
                                "choosing step_num)")
    rulesets = [e.value for e in step_num.test.comparators[0].elts if isinstance(e, ast.Constant)]
    drops, default = _drops(summarizer)
    return OfficialCode(frozenset(samples), frozenset(first_pass), frozenset(rulesets), drops, default)


def _function(module: str, name: str) -> ast.AST:
    """A function's syntax tree from its module's file: importing the module would cost seconds
    (scipy, pandas) that the whole review of a round does not."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise _missing(f"module {module}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name), None)
    if found is None:
        raise _missing(f"{module}.{name}")
    return found


def _missing(what: str) -> DataError:
    import mlperf_logging

    version = getattr(mlperf_logging, "__version__", "?")
    return DataError(f"mlperf_logging {version}: {what} not found in its code; update trainclock/review/official_code.py")


def _branch(tree: ast.AST, holds: Callable[[ast.AST], bool]) -> ast.If | None:
    """The innermost `if` testing `benchmark` whose body (not its elif/else) holds a node `holds` accepts."""
    found = None
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and _benchmark_tests(node.test)
                and any(holds(inner) for stmt in node.body for inner in ast.walk(stmt))):
            found = node  # ast.walk goes outside in: the last one found is the innermost
    return found


def _benchmark_tests(test: ast.AST) -> list[ast.Compare]:
    """The comparisons `benchmark == "X"` and `benchmark in {...}` in an if's test."""
    return [node for node in ast.walk(test)
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "benchmark"
            and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.In)]


def _benchmarks_of(branch: ast.If | None, what: str) -> set[str]:
    """The benchmark names the branch's test compares `benchmark` with."""
    names: set[str] = set()
    for compare in _benchmark_tests(branch.test) if branch else []:
        other = compare.comparators[0]
        elements = other.elts if isinstance(other, ast.Set | ast.List | ast.Tuple) else [other]
        names |= {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    if not names:
        raise _missing(what)
    return names


def _subscripts(key: str) -> Callable[[ast.AST], bool]:
    """Whether a node is `...[key]`."""
    return lambda node: (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                         and node.slice.value == key)


def _ifexp(tree: ast.AST, chosen: str) -> ast.IfExp:
    """The `"<chosen>" if ruleset in [...] else ...` expression."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.IfExp) and isinstance(node.body, ast.Constant) and node.body.value == chosen
                and isinstance(node.test, ast.Compare) and isinstance(node.test.comparators[0], ast.List | ast.Set)):
            return node
    raise _missing(f"the rulesets where a benchmark's evaluations are keyed by {chosen} "
                   f"(`{chosen!r} if ruleset in [...]`)")


def _drops(tree: ast.AST) -> tuple[dict[str, int], int]:
    """`max_dropped_scores = N if benchmark == "X" else M`: ({X: N}, M)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "max_dropped_scores"
                                                 for t in node.targets) and isinstance(node.value, ast.IfExp)):
            test, body, other = node.value.test, node.value.body, node.value.orelse
            if (isinstance(test, ast.Compare) and isinstance(test.comparators[0], ast.Constant)
                    and isinstance(body, ast.Constant) and isinstance(other, ast.Constant)):
                return {test.comparators[0].value: body.value}, other.value
    raise _missing("the summarizer's max_dropped_scores")
