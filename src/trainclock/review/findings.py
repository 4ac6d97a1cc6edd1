"""What a review found, and a bounded list of it: a log of any size can fail the same rule on every
line (a stuck process repeating init_start, a damaged file of malformed lines), so only the first
few findings of each rule and key are kept, and the rest become one finding that counts them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

# per (rule, key, severity): enough to see the pattern; real logs stay far below it
KEPT_PER_KIND = 50


@dataclass(frozen=True)
class Finding:
    rule: str  # the rule file, e.g. "training_X.Y.0/closed_<benchmark>.yaml", or "log format"
    key: str | None  # the MLLOG key the rule is about
    message: str
    lineno: int | None = None  # the log line it concerns, if one
    severity: str = "error"  # "error" fails the run; "warning" does not
    repeats: int = 1  # how many findings this one stands for: more than 1 for the summary of a capped kind

    @property
    def text(self) -> str:
        """The finding without its line number."""
        about = f"{self.key}: " if self.key else ""
        return f"{about}{self.message} [{self.rule}]"

    def __str__(self) -> str:
        return f"line {self.lineno}: {self.text}" if self.lineno else self.text


class Findings:
    """Findings in the order found, at most KEPT_PER_KIND of each kind plus one summary per kind
    that went past it. Each is added with the key whose redefinition by a later rule file
    withdraws it (how a closed_<benchmark>.yaml overrides common.yaml); None: never withdrawn."""

    def __init__(self, kept_per_kind: int = KEPT_PER_KIND) -> None:
        self._limit = kept_per_kind
        self._kept: list[tuple[tuple, Finding]] = []
        self._counts: Counter[tuple] = Counter()
        self._lines: dict[tuple, tuple[int | None, int | None]] = {}  # of the findings past the limit

    def add(self, finding: Finding, overridable_by: str | None = None) -> None:
        kind = (overridable_by, finding.rule, finding.key, finding.severity)
        self._counts[kind] += 1
        if self._counts[kind] <= self._limit:
            self._kept.append((kind, finding))
        elif finding.lineno is not None:
            first, _ = self._lines.get(kind, (finding.lineno, None))
            self._lines[kind] = (first, finding.lineno)

    def counted(self, overridable_by: str | None, rule: str, key: str | None, severity: str,
                lineno: int | None) -> bool:
        """Count a finding of a kind already past the limit, without its message (which can cost
        more than the check that failed); False when it must be added in full."""
        kind = (overridable_by, rule, key, severity)
        if self._counts[kind] < self._limit:
            return False
        self.add(Finding(rule, key, "", lineno, severity), overridable_by)
        return True

    def withdraw(self, keys: object) -> None:
        """Drop the findings a rule file that defines `keys` overrides."""
        self._kept = [(kind, f) for kind, f in self._kept if kind[0] is None or kind[0] not in keys]
        for kind in [k for k in self._counts if k[0] is not None and k[0] in keys]:
            del self._counts[kind]
            self._lines.pop(kind, None)

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def __iter__(self):
        return iter(self.as_list())

    def as_list(self) -> list[Finding]:
        found = [f for _, f in self._kept]
        for kind, count in self._counts.items():
            if count > self._limit:
                _, rule, key, severity = kind
                first, last = self._lines.get(kind, (None, None))
                where = f" (lines {first} to {last})" if first is not None else ""
                found.append(Finding(rule, key, f"and {count - self._limit:,} more like the above{where}; "
                                                f"only the first {self._limit} are listed", None, severity,
                                     repeats=count - self._limit))
        return found
