"""Every MLPerf Training round trainclock reviews, as data: its benchmarks and each one's scoring
rule, read from the installed mlperf_logging (benchmark_meta, the rule files, the RCP tables and
what its code does, review/official_code.py) plus the hand-written facts of rules/scoring.yaml and
the progress units of rules/benchmarks.yaml."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from types import MappingProxyType

import yaml
from mlperf_logging.benchmark_meta import _ALL_ALLOWED_BENCHMARKS, get_result_file_counts

from trainclock.errors import DataError
from trainclock.review import rulebook
from trainclock.review.benchmarks import field_unit
from trainclock.review.official_code import official_code
from trainclock.review.round_rules import FIRST_PASS, LAST_EVAL, ScoringRule

USAGE = "training"


@dataclass(frozen=True)
class Round:
    name: str  # "X.Y"
    ruleset: str  # "X.Y.0", as mlperf_logging names it
    benchmarks: tuple[str, ...]  # allowed in the round (benchmark_meta), in its order
    rules: Mapping[str, ScoringRule]  # those trainclock can score: official rule files and its own facts

    def missing(self, benchmark: str | None) -> str | None:
        """Why an entry of `benchmark` cannot be scored in this round, in one line; None if it can."""
        if benchmark in self.rules:
            return None
        if not benchmark:
            return "the logs name no benchmark (submission_benchmark)"
        if benchmark not in self.benchmarks:
            return (f"round {self.name} has no benchmark {benchmark!r}: its benchmarks are "
                    f"{', '.join(self.benchmarks)}; is the round right? (--round)")
        if not _has_rule_file(self.ruleset, benchmark):
            return (f"mlperf_logging {_version()} ships no compliance rules for {benchmark} in round {self.name} "
                    f"(compliance_checker/training_{self.ruleset}/closed_{benchmark}.yaml)")
        return f"trainclock has no scoring facts for {benchmark} (review/rules/scoring.yaml)"

    def quality_target(self, benchmark: str) -> dict[str, str]:
        """The quality target(s) of the closed division's rule file: key -> the check a line must pass."""
        rules = rulebook.load(f"training_{self.ruleset}/closed_{benchmark}.yaml")
        return {name: key.target.source for name, key in rules.keys.items() if key.target} if rules else {}

    def rcp_table(self, benchmark: str, rcp_dir: Path | None = None) -> Path:
        """Where the round's reference convergence points of `benchmark` are (the file may be absent)."""
        return (rcp_dir or _rcp_dir()) / f"{USAGE}_{self.ruleset}" / f"rcps_{benchmark}.json"


@functools.cache
def all_rounds() -> Mapping[str, Round]:
    """Round name -> Round, oldest first: each training round of benchmark_meta from
    scoring.yaml's first_round on whose compliance rules the package ships."""
    facts = _facts()
    first = _version_key(facts["first_round"])
    found = {}
    for name, benchmarks in sorted(_ALL_ALLOWED_BENCHMARKS[USAGE].items(), key=lambda item: _version_key(item[0])):
        ruleset = f"{name}.0"
        if _version_key(name) < first or not rulebook.round_has_rules(name):
            continue
        allowed = tuple(dict.fromkeys(benchmarks))  # a round may list a benchmark twice
        rules = {b: _rule(b, name, ruleset, facts["benchmarks"][b]) for b in allowed
                 if b in facts["benchmarks"] and _has_rule_file(ruleset, b)}
        found[name] = Round(name, ruleset, allowed, MappingProxyType(rules))
    return MappingProxyType(found)


def round_of(name: str) -> Round | None:
    return all_rounds().get(name)


def published() -> Mapping[str, date]:
    """Round name -> the day MLCommons published its results (rules/scoring.yaml)."""
    return MappingProxyType(_facts()["published"])


def unnamed_own_round() -> str:
    """The round whose rules trainclock's logs followed before they named it (rules/scoring.yaml)."""
    return _facts()["unnamed_own_round"]


def _rule(benchmark: str, round_: str, ruleset: str, row: dict) -> ScoringRule:
    code = official_code()
    drop = code.drops.get(benchmark, code.default_drop)
    # rcp_checker.read_submission_file's cases, in its order
    if benchmark in code.first_pass_benchmarks:
        key = "step_num" if ruleset in code.step_num_rulesets else "samples_count"
        how, decimals = FIRST_PASS, None
    elif benchmark in code.samples_count_benchmarks:
        key, how, decimals = "samples_count", LAST_EVAL, None
    else:
        key, how, decimals = "epoch_num", LAST_EVAL, 3
    progress = field_unit(benchmark, key)
    if progress is None:
        raise DataError(f"no progress unit for {benchmark}'s {key}: add {benchmark} to review/rules/benchmarks.yaml")
    rcp_pass = tuple((metric, op, float(limit)) for metric, (op, limit) in (row.get("rcp_pass") or {}).items())
    return ScoringRule(benchmark=benchmark, runs=get_result_file_counts(USAGE)[benchmark], drop=drop,
                       not_converged=drop, progress=progress, rcp_progress=how,
                       rcp_pass=rcp_pass, rcp_key=key, rcp_decimals=decimals,
                       rcp_slack=float(_in_round(row.get("rcp_slack", 0), round_) or 0), round=round_)


def _in_round(value: object, round_: str) -> object:
    """A fact's value in `round_`: a plain value, or {first round: value} where it changed."""
    if not isinstance(value, dict):
        return value
    since = [first for first in value if _version_key(first) <= _version_key(round_)]
    return value[max(since, key=_version_key)] if since else None


def _has_rule_file(ruleset: str, benchmark: str) -> bool:
    return (rulebook.OFFICIAL_RULES / f"{USAGE}_{ruleset}" / f"closed_{benchmark}.yaml").is_file()


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


@functools.cache
def _facts() -> dict:
    return yaml.safe_load((rulebook.OWN_RULES / "scoring.yaml").read_text())


def _rcp_dir() -> Path:
    import mlperf_logging.rcp_checker  # the package only: its checker module imports scipy

    return Path(mlperf_logging.rcp_checker.__file__).parent


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlperf-logging")
    except PackageNotFoundError:
        return "(installed)"
