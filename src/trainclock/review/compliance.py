"""Checks one log against the rules of its round: the official chain of rule files (common ->
division -> benchmark, each file naming the next from the log's own values), then trainclock's
house rules. Semantics follow the MLCommons checker (mlperf_logging.compliance_checker) record for
record, so a log passes here exactly when it passes there, with three differences that make it
usable on any input: every failure carries its log line number (the official one counts MLLOG
lines only), a rule that cannot be evaluated on a weird value is a failure instead of a crash,
and every failed occurrence is kept, not only the last one per key.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlperf_logging.compliance_checker.mlp_compliance import is_integer

from trainclock.mllog.reader import Event, Malformed
from trainclock.review import rulebook
from trainclock.review.rulebook import KeyRule, RuleFile, Test


@dataclass(frozen=True)
class Finding:
    rule: str  # the rule file, e.g. "training_3.1.0/closed_bert.yaml", or "log format"
    key: str | None  # the MLLOG key the rule is about
    message: str
    lineno: int | None = None  # the log line it concerns, if one
    severity: str = "error"  # "error" fails the run; "warning" does not

    @property
    def text(self) -> str:
        """The finding without its line number."""
        about = f"{self.key}: " if self.key else ""
        return f"{about}{self.message} [{self.rule}]"

    def __str__(self) -> str:
        return f"line {self.lineno}: {self.text}" if self.lineno else self.text


@dataclass(slots=True)
class LogLine:
    """A log line in the shape the official rule code reads (mlp_parser.LogLine): `ll.timestamp`,
    `ll.key`, `ll.value['value']`, `ll.value['metadata']`; stable diffusion's rules copy and edit them."""

    full_string: str
    timestamp: int | float
    key: str
    value: dict
    lineno: int


@dataclass
class ComplianceReport:
    findings: list[Finding]
    # for each key with a quality target (ATLEAST_ONE_CHECK), the lines that met it, as judged
    # by the last rule file that set one (the benchmark's, over the division's)
    target_met: dict[str, list[LogLine]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


def check(events: Sequence[Event], round_: str, malformed: Sequence[Malformed] = ()) -> ComplianceReport:
    """All findings for one log's events under `round_`'s rules ("3.0", "3.1")."""
    lines = [LogLine("", e.time_ms, e.key, {"value": e.value, "metadata": e.metadata}, e.lineno) for e in events]
    findings = [Finding("log format", None, m.reason, m.lineno) for m in malformed]
    if not lines:
        findings.append(Finding("log format", None, "no :::MLLOG lines in the file"))
        return ComplianceReport(findings)
    official = _Chain(lines)
    official.run(rulebook.official_start(round_))
    house = _Chain(lines)
    house.run(rulebook.HOUSE_RULES)
    return ComplianceReport(findings + official.findings() + house.findings(), official.target_met)


class _Chain:
    """One chain of rule files: a file may enqueue more, and a later file that defines a key
    replaces the earlier files' findings about it (how closed_gpt3.yaml overrides common.yaml)."""

    def __init__(self, lines: list[LogLine]) -> None:
        self.lines = list(lines)  # a rule file's BEGIN may append virtual lines (stable diffusion)
        self.key_counts = Counter(line.key for line in lines)
        self.queue: list[str] = []
        self._found: list[tuple[str | None, Finding]] = []  # (key it can be overridden by, finding)
        self.target_met: dict[str, list[LogLine]] = {}

    def findings(self) -> list[Finding]:
        return [finding for _, finding in self._found]

    def run(self, start: str) -> None:
        self.queue.append(start)
        while self.queue:
            name = self.queue.pop(0)
            rules = rulebook.load(name)
            if rules is None:
                self._add(None, Finding(_short(name, 100), None, f"no rule file {_short(name, 100)}: the log names "
                                                                 "a division or benchmark this round has no rules for"))
            else:
                self._apply(rules)

    def _add(self, overridable_by: str | None, finding: Finding) -> None:
        self._found.append((overridable_by, finding))

    def _apply(self, rules: RuleFile) -> None:
        self._found = [(key, f) for key, f in self._found if key not in rules.keys]
        s: dict[str, Any] = {}
        state = {"enqueue_config": self.queue.append, "s": s, "is_integer": is_integer, "math": math}
        if rules.begin:
            self._run_code(rules, None, lambda: exec(rules.begin, state, {"loglines": self.lines}), "BEGIN")
        seen: dict[str, list[Any]] = {key: [] for key in rules.keys}
        first_checked: set[str] = set()
        target_tried: dict[str, list[LogLine]] = {}
        met: dict[str, list[LogLine]] = {}
        for ll in self.lines:
            rule = rules.keys.get(ll.key)
            if rule is None:
                continue
            seen[ll.key].append(ll.value.get("value"))
            # as the official checker: submission_* keys are checked at their first occurrence only
            if not ("submission_" in ll.key and len(seen[ll.key]) > 1):
                self._check_line(rules, rule, ll, state)
            if rule.first_checks and ll.key not in first_checked:
                first_checked.add(ll.key)
                self._evaluate(rules, rule, rule.first_checks, ll, state)
            if rule.target:
                target_tried.setdefault(ll.key, []).append(ll)
                if self._meets_target(rules, rule, ll, state):
                    met.setdefault(ll.key, []).append(ll)
        for key, tried in target_tried.items():
            if key not in met:
                self._add(None, _target_missed(rules, rules.keys[key], tried))
        self.target_met.update({key: met.get(key, []) for key in target_tried})
        self._check_counts(rules, seen)
        self._check_end(rules, state)

    def _check_line(self, rules: RuleFile, rule: KeyRule, ll: LogLine, state: dict) -> None:
        local = {"ll": ll, "v": ll.value}
        if rule.pre:
            self._run_code(rules, ll, lambda: exec(rule.pre, state, local), "PRE", rule.name)
        self._evaluate(rules, rule, rule.checks, ll, state)
        if rule.post:
            self._run_code(rules, ll, lambda: exec(rule.post, state, local), "POST", rule.name)

    def _evaluate(self, rules: RuleFile, rule: KeyRule, tests: tuple[Test, ...], ll: LogLine, state: dict) -> None:
        for test in tests:
            outcome = _run_test(test, ll, state)
            if outcome is not True:
                message = _cannot(test, outcome) if isinstance(outcome, Exception) else _explain(rule, test, ll)
                self._add(rule.name, Finding(rules.name, rule.name, message, _lineno(ll)))

    def _meets_target(self, rules: RuleFile, rule: KeyRule, ll: LogLine, state: dict) -> bool:
        outcome = _run_test(rule.target, ll, state)
        if isinstance(outcome, Exception):  # the official checker would crash here
            self._add(None, Finding(rules.name, rule.name, _cannot(rule.target, outcome), _lineno(ll)))
        return outcome is True

    def _run_code(self, rules: RuleFile, ll: LogLine | None, run: Callable[[], None], part: str,
                  key: str | None = None) -> None:
        try:
            run()
        except Exception as e:  # rule code meets arbitrary log values
            message = f"the rule's {part} code failed on this log ({type(e).__name__}: {str(e)[:80]})"
            self._add(key, Finding(rules.name, key, message, _lineno(ll) if ll else None))

    def _check_counts(self, rules: RuleFile, seen: dict[str, list[Any]]) -> None:
        alternatives: set[frozenset[str]] = set()
        for key, rule in rules.keys.items():
            req, values = rule.req, seen[key]
            if not req or req == "OPTIONAL":
                continue
            if req == "EXACTLY_ONE" and len(values) != 1:
                if values and values.count(values[0]) == len(values):
                    # the official checker only warns about repeats of one value (per-rank lines)
                    self._add(key, Finding(rules.name, key, f"logged {len(values)} times with the same "
                                                            "value; the rules ask for exactly one", severity="warning"))
                else:
                    shown = ", ".join(sorted({_short(v) for v in values}))
                    detail = f" with different values: {shown}" if values else ""
                    self._add(key, Finding(rules.name, key, f"required exactly once, found {len(values)}{detail}"))
            elif req == "AT_LEAST_ONE" and not values:
                self._add(key, Finding(rules.name, key, "required at least once, found none"))
            elif req.startswith("AT_LEAST(") and req.endswith(")"):
                needed = int(req[len("AT_LEAST("):-1])
                if len(values) < needed:
                    self._add(key, Finding(rules.name, key, f"required at least {needed} times, found {len(values)}"))
            elif req.startswith("AT_LEAST_ONE_OR(") and req.endswith(")"):
                others = [name.strip() for name in req[len("AT_LEAST_ONE_OR("):-1].split(",")]
                alternatives.add(frozenset([key, *others]))
        for group in sorted(alternatives, key=sorted):
            if not any(self.key_counts[key] or seen.get(key) for key in group):
                names = " or ".join(sorted(group))
                self._add(None, Finding(rules.name, None, f"required at least one of {names}, found none"))

    def _check_end(self, rules: RuleFile, state: dict) -> None:
        if rules.end_pre:
            self._run_code(rules, None, lambda: exec(rules.end_pre, state), "END")
        for test in rules.end_checks:
            try:
                ok = bool(eval(test.code, state))
            except Exception as e:
                ok, test_note = False, f" ({type(e).__name__})"
            else:
                test_note = ""
            if not ok:
                self._add(None, Finding(rules.name, None, f"end-of-log check `{test.source}` failed{test_note}"))


def _run_test(test: Test, ll: LogLine, state: dict) -> bool | Exception:
    """True or False as the test says; the exception if it raised (a missing metadata field, a
    string where a number belongs): the rule code meets arbitrary log values."""
    try:
        return bool(eval(test.code, state, {"ll": ll, "v": ll.value}))
    except Exception as e:
        return e


def _cannot(test: Test, error: Exception) -> str:
    return f"cannot evaluate `{test.source}` on this line ({type(error).__name__}: {str(error)[:80]})"


def _explain(rule: KeyRule, test: Test, ll: LogLine) -> str:
    shown = f"{rule.name} = {_short(ll.value.get('value'))}"
    if "metadata" in test.source:
        metadata = {k: v for k, v in (ll.value.get("metadata") or {}).items() if k not in ("file", "lineno")}
        shown += f" with metadata {_short(metadata)}"
    failed = f"{shown} fails `{test.source}`"
    return f"{rule.why} ({failed})" if rule.why else failed


def _target_missed(rules: RuleFile, rule: KeyRule, tried: list[LogLine]) -> Finding:
    last = tried[-1]
    where = f", line {_lineno(last)}," if _lineno(last) else ""
    message = (f"no {rule.name} line meets the quality target `{rule.target.source}` "
               f"({len(tried)} checked; the last{where} has {_short(last.value.get('value'))})")
    return Finding(rules.name, rule.name, rule.why + f" ({message})" if rule.why else message)


def _lineno(ll: LogLine) -> int | None:
    return ll.lineno if ll.lineno and ll.lineno > 0 else None  # virtual lines carry -1


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) and limit > 60 else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
