"""Checks one log against the rules of its round: the official chain of rule files (common ->
division -> benchmark, each file naming the next from the log's own values), then trainclock's
house rules. Semantics follow the MLCommons checker (mlperf_logging.compliance_checker) record for
record, so a log passes here exactly when it passes there, with three differences that make it
usable on any input: every failure carries its log line number (the official one counts MLLOG
lines only), a rule that cannot be evaluated on a weird value is a failure instead of a crash,
and every failed occurrence is reported, not only the last one per key (the first few of each
kind listed, the rest counted). The log is streamed: each rule file is one pass over it, and the
first pass also feeds the caller's summary, so memory does not grow with the log.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mlperf_logging.compliance_checker.mlp_compliance import is_integer

from trainclock.mllog.progress import logged_count
from trainclock.mllog.reader import Event, Malformed
from trainclock.review import rulebook
from trainclock.review.findings import Finding, Findings
from trainclock.review.rulebook import KeyRule, RuleFile, Test

__all__ = ["ComplianceReport", "Finding", "LogLine", "check", "line_progress"]


@dataclass(slots=True)
class LogLine:
    """A log line in the shape the official rule code reads (mlp_parser.LogLine): `ll.timestamp`,
    `ll.key`, `ll.value['value']`, `ll.value['metadata']`; some benchmarks' rules copy and edit them."""

    full_string: str
    timestamp: int | float
    key: str
    value: dict
    lineno: int


def line_progress(value: dict[str, Any]) -> int | float | None:
    """Progress of a compliance line ({"value": ..., "metadata": ...}); rules that aggregate
    evaluations build virtual lines with the count inside the value."""
    metadata = value.get("metadata")
    found = logged_count(metadata) if isinstance(metadata, dict) else None
    inner = value.get("value")
    if found is None and isinstance(inner, dict):
        found = logged_count(inner)
    return found


@dataclass
class ComplianceReport:
    findings: list[Finding]
    # for each key with a quality target (ATLEAST_ONE_CHECK), the line that met it earliest in
    # progress (else the first that met it), as judged by the last rule file that set one (the
    # benchmark's, over the division's); an empty list where none met it
    target_met: dict[str, list[LogLine]] = field(default_factory=dict)
    events: int = 0  # the log's readable MLLOG events

    @property
    def passed(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


# lines of a pass kept so that a rule file enqueued near the start (by submission_division or
# submission_benchmark, in the header) joins the pass under way instead of costing one more
PREFIX_KEPT = 8_192


def check(events: Iterable[Event | Malformed], round_: str, malformed: Iterable[Malformed] = (),
          observe: Callable[[Event], None] | None = None) -> ComplianceReport:
    """All findings for one log's events under `round_`'s rules ("X.Y").

    `events` is iterated once per pass (a list, or a LogSource that reads its file again), so
    memory does not grow with the log: one pass for a log whose header names its division and
    benchmark within its first PREFIX_KEPT lines, one more per rule file otherwise. Malformed
    items in it are reported like `malformed`. `observe` sees each event once, in the first pass,
    for callers that summarize the log."""
    findings = Findings()
    for m in malformed:
        findings.add(_malformed(m))
    chains = (_Chain(_Lines(events), rulebook.official_start(round_)), _Chain(_Lines(events), rulebook.HOUSE_RULES))
    count, first = 0, True
    while passes := [p for chain in chains for p in chain.start_queued([])]:
        prefix: list[LogLine] | None = []
        for item in events:
            if isinstance(item, Malformed):
                if first:
                    findings.add(_malformed(item))
                continue
            if first:
                count += 1
                if observe is not None:
                    observe(item)
            ll = _log_line(item)
            if prefix is not None:
                prefix.append(ll)
                if len(prefix) > PREFIX_KEPT:
                    prefix = None
            for one in passes:
                one.feed(ll)
            if prefix is not None:
                for chain in chains:
                    if chain.queue:
                        passes += chain.start_queued(prefix)
        for one in passes:
            one.finish()
        if first and not count:
            findings.add(Finding("log format", None, "no :::MLLOG lines in the file"))
            return ComplianceReport(findings.as_list())
        first = False
    official, house = chains
    return ComplianceReport(findings.as_list() + official.findings() + house.findings(), official.target_met, count)


def _malformed(m: Malformed) -> Finding:
    return Finding("log format", None, m.reason, m.lineno)


def _log_line(e: Event) -> LogLine:
    return LogLine("", e.time_ms, e.key, {"value": e.value, "metadata": e.metadata}, e.lineno)


class _Lines:
    """A chain's view of the log for rule code (`loglines`): the file's lines, read again on each
    iteration, then the virtual lines rule code appended (a benchmark's aggregated evals)."""

    def __init__(self, events: Iterable[Event | Malformed]) -> None:
        self._events = events
        self.extra: list[LogLine] = []

    def __iter__(self) -> Iterator[LogLine]:
        yield from (_log_line(e) for e in self._events if not isinstance(e, Malformed))
        yield from self.extra

    def append(self, line: LogLine) -> None:
        self.extra.append(line)

    def extend(self, lines: Iterable[LogLine]) -> None:
        self.extra.extend(lines)


class _Chain:
    """One chain of rule files: a file may enqueue more, and a later file that defines a key
    replaces the earlier files' findings about it (how a closed_<benchmark>.yaml overrides common.yaml)."""

    def __init__(self, lines: _Lines, start: str) -> None:
        self.lines = lines
        self.queue: list[str] = [start]
        self.parts: list[tuple[frozenset[str], Findings]] = []  # per rule file, in the order they started
        self.target_met: dict[str, list[LogLine]] = {}

    def findings(self) -> list[Finding]:
        found = []
        for i, (_, part) in enumerate(self.parts):
            later = frozenset().union(*(keys for keys, _ in self.parts[i + 1:]))
            part.withdraw(later)  # as if each file had started only when the one before it ended
            found += part.as_list()
        return found

    def start_queued(self, prefix: list[LogLine]) -> list[_FilePass]:
        """Passes of the queued rule files, each fed `prefix` (the lines of the pass so far)."""
        started = []
        while self.queue:
            name = self.queue.pop(0)
            rules = rulebook.load(name)
            if rules is None:
                missing = Findings()
                missing.add(Finding(_short(name, 100), None, f"no rule file {_short(name, 100)}: the log names "
                                                             "a division or benchmark this round has no rules for"))
                self.parts.append((frozenset(), missing))
                continue
            one = _FilePass(self, rules)
            for ll in prefix:  # may enqueue more, started in this loop
                one.feed(ll)
            started.append(one)
        return started


class _Seen:
    """What the count checks need of a key's values: how many, and whether all equal the first."""

    __slots__ = ("count", "first", "same", "shown", "more")

    def __init__(self) -> None:
        self.count, self.first, self.same, self.shown, self.more = 0, None, True, set(), False

    def add(self, value: Any) -> None:
        self.count += 1
        if self.count == 1:
            self.first = value
            self.shown.add(_short(value))
        elif not (self.more or value is self.first or value == self.first):
            # repr only values unlike the first: a per-rank key repeats one value thousands of times
            self.same = False
            text = _short(value)
            if len(self.shown) < 10:
                self.shown.add(text)
            elif text not in self.shown:
                self.more = True


class _FilePass:
    """One rule file applied to the log line by line: its BEGIN runs first, each line is fed, and
    finish() runs the count, quality-target and END checks."""

    def __init__(self, chain: _Chain, rules: RuleFile) -> None:
        self.chain, self.rules = chain, rules
        self.found = Findings()
        chain.parts.append((frozenset(rules.keys), self.found))
        self.state = {"enqueue_config": chain.queue.append, "s": {}, "is_integer": is_integer, "math": math}
        self.seen: dict[str, _Seen] = {key: _Seen() for key in rules.keys}
        self.first_checked: set[str] = set()
        self.tried: dict[str, list] = {}  # key -> [lines checked against its target, the last one]
        self.met: dict[str, list] = {}  # key -> [line of least progress, that progress, first line met]
        self.alternatives = {frozenset([key, *(n.strip() for n in rule.req[len("AT_LEAST_ONE_OR("):-1].split(","))])
                             for key, rule in rules.keys.items()
                             if rule.req and rule.req.startswith("AT_LEAST_ONE_OR(") and rule.req.endswith(")")}
        self.group_keys = frozenset().union(*self.alternatives) if self.alternatives else frozenset()
        self.key_counts: Counter[str] = Counter()
        if rules.begin:
            self._run_code(None, lambda: exec(rules.begin, self.state, {"loglines": chain.lines}), "BEGIN")
        # the virtual lines there are now: those a later file's BEGIN adds are not this file's
        self.extra_seen = len(chain.lines.extra)

    def feed(self, ll: LogLine) -> None:
        if ll.key in self.group_keys:
            self.key_counts[ll.key] += 1
        rule = self.rules.keys.get(ll.key)
        if rule is None:
            return
        seen = self.seen[ll.key]
        seen.add(ll.value.get("value"))
        # as the official checker: submission_* keys are checked at their first occurrence only
        if not ("submission_" in ll.key and seen.count > 1):
            self._check_line(rule, ll)
        if rule.first_checks and ll.key not in self.first_checked:
            self.first_checked.add(ll.key)
            self._evaluate(rule, rule.first_checks, ll)
        if rule.target:
            tried = self.tried.setdefault(ll.key, [0, None])
            tried[0] += 1
            tried[1] = ll
            if self._meets_target(rule, ll):
                self._met(ll)

    def finish(self) -> None:
        for ll in self.chain.lines.extra[:self.extra_seen]:  # after the file's lines, as in the official checker
            self.feed(ll)
        rules = self.rules
        for key, (count, last) in self.tried.items():
            if key not in self.met:
                self._add(None, _target_missed(rules, rules.keys[key], count, last))
        for key in self.tried:
            best, _, first = self.met.get(key, (None, None, None))
            self.chain.target_met[key] = [best or first] if first else []
        self._check_counts()
        self._check_end()

    def _met(self, ll: LogLine) -> None:
        # the convergence point is the least progress that met the target: only that line is kept
        met = self.met.setdefault(ll.key, [None, None, ll])
        reached = line_progress(ll.value)
        if reached is not None and (met[1] is None or reached < met[1]):
            met[0], met[1] = ll, reached

    def _add(self, overridable_by: str | None, finding: Finding) -> None:
        self.found.add(finding, overridable_by)

    def _check_line(self, rule: KeyRule, ll: LogLine) -> None:
        local = {"ll": ll, "v": ll.value}
        if rule.pre:
            self._run_code(ll, lambda: exec(rule.pre, self.state, local), "PRE", rule.name)
        self._evaluate(rule, rule.checks, ll)
        if rule.post:
            self._run_code(ll, lambda: exec(rule.post, self.state, local), "POST", rule.name)

    def _evaluate(self, rule: KeyRule, tests: tuple[Test, ...], ll: LogLine) -> None:
        for test in tests:
            outcome = _run_test(test, ll, self.state)
            if outcome is not True:
                if self.found.counted(rule.name, self.rules.name, rule.name, "error", _lineno(ll)):
                    continue
                message = _cannot(test, outcome) if isinstance(outcome, Exception) else _explain(rule, test, ll)
                self._add(rule.name, Finding(self.rules.name, rule.name, message, _lineno(ll)))

    def _meets_target(self, rule: KeyRule, ll: LogLine) -> bool:
        outcome = _run_test(rule.target, ll, self.state)
        if isinstance(outcome, Exception):  # the official checker would crash here
            self._add(None, Finding(self.rules.name, rule.name, _cannot(rule.target, outcome), _lineno(ll)))
        return outcome is True

    def _run_code(self, ll: LogLine | None, run: Callable[[], None], part: str, key: str | None = None) -> None:
        try:
            run()
        except Exception as e:  # rule code meets arbitrary log values
            message = f"the rule's {part} code failed on this log ({type(e).__name__}: {str(e)[:80]})"
            self._add(key, Finding(self.rules.name, key, message, _lineno(ll) if ll else None))

    def _check_counts(self) -> None:
        rules = self.rules
        for key, rule in rules.keys.items():
            req, values = rule.req, self.seen[key]
            if not req or req == "OPTIONAL":
                continue
            if req == "EXACTLY_ONE" and values.count != 1:
                if values.count and values.same:
                    # the official checker only warns about repeats of one value (per-rank lines)
                    self._add(key, Finding(rules.name, key, f"logged {values.count} times with the same "
                                                            "value; the rules ask for exactly one", severity="warning"))
                else:
                    shown = ", ".join(sorted(values.shown)) + (", ..." if values.more else "")
                    detail = f" with different values: {shown}" if values.count else ""
                    self._add(key, Finding(rules.name, key, f"required exactly once, found {values.count}{detail}"))
            elif req == "AT_LEAST_ONE" and not values.count:
                self._add(key, Finding(rules.name, key, "required at least once, found none"))
            elif req.startswith("AT_LEAST(") and req.endswith(")"):
                needed = int(req[len("AT_LEAST("):-1])
                if values.count < needed:
                    self._add(key, Finding(rules.name, key, f"required at least {needed} times, found {values.count}"))
        for group in sorted(self.alternatives, key=sorted):
            if not any(self.key_counts[key] or (key in self.seen and self.seen[key].count) for key in group):
                names = " or ".join(sorted(group))
                self._add(None, Finding(rules.name, None, f"required at least one of {names}, found none"))

    def _check_end(self) -> None:
        rules = self.rules
        if rules.end_pre:
            self._run_code(None, lambda: exec(rules.end_pre, self.state), "END")
        for test in rules.end_checks:
            try:
                ok = bool(eval(test.code, self.state))
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


def _target_missed(rules: RuleFile, rule: KeyRule, tried: int, last: LogLine) -> Finding:
    where = f", line {_lineno(last)}," if _lineno(last) else ""
    message = (f"no {rule.name} line meets the quality target `{rule.target.source}` "
               f"({tried:,} checked; the last{where} has {_short(last.value.get('value'))})")
    return Finding(rules.name, rule.name, rule.why + f" ({message})" if rule.why else message)


def _lineno(ll: LogLine) -> int | None:
    return ll.lineno if ll.lineno and ll.lineno > 0 else None  # virtual lines carry -1


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) and limit > 60 else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
