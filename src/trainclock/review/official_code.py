"""Scoring facts that mlperf_logging keeps in its code rather than in data, read from that code
(its syntax tree, never run): which benchmarks' convergence point is eval_accuracy's samples_count,
in which rulesets stable diffusion counts step_num, and how many runs the summarizer drops. A
package whose code no longer has these shapes is a clear error, caught by tests/review, not a
silent guess."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from trainclock.errors import DataError


@dataclass(frozen=True)
class OfficialCode:
    samples_count_benchmarks: frozenset[str]  # rcp_checker reads their samples_count, unrounded
    step_num_rulesets: frozenset[str]  # where stable diffusion's point is step_num (else samples_count)
    drops: dict[str, int]  # the summarizer's max_dropped_scores where it is not the default
    default_drop: int


@functools.cache
def official_code() -> OfficialCode:
    reader = _function("mlperf_logging.rcp_checker.rcp_checker", "read_submission_file")
    samples = _set_compared_with(reader, "benchmark", "llama2_70b_lora")
    rulesets = _ifexp_list(reader, "step_num")
    drops, default = _drops(_function("mlperf_logging.result_summarizer.result_summarizer",
                                      "_compute_strong_score_standalone"))
    return OfficialCode(frozenset(samples), frozenset(rulesets), drops, default)


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


def _set_compared_with(tree: ast.AST, name: str, member: str) -> set[str]:
    """The string set in `<name> in {...}` that holds `member`."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == name
                and len(node.comparators) == 1 and isinstance(node.comparators[0], ast.Set | ast.List)):
            values = {e.value for e in node.comparators[0].elts if isinstance(e, ast.Constant)}
            if member in values:
                return values
    raise _missing(f"the benchmarks read by samples_count (`{name} in {{...{member!r}...}}`)")


def _ifexp_list(tree: ast.AST, chosen: str) -> list[str]:
    """The list in `"<chosen>" if ruleset in [...] else ...`."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.IfExp) and isinstance(node.body, ast.Constant) and node.body.value == chosen
                and isinstance(node.test, ast.Compare) and isinstance(node.test.comparators[0], ast.List | ast.Set)):
            return [e.value for e in node.test.comparators[0].elts if isinstance(e, ast.Constant)]
    raise _missing(f"the rulesets where stable diffusion counts {chosen}")


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
