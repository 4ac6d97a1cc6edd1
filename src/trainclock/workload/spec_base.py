"""What every benchmark's member spec holds in the same form: its name, batch, quality target and
where that target comes from, and the lookup of members by name. A benchmark's spec subclasses
MemberSpec with its own shape and hyperparameters; its spec module lists the members once in a
MemberSet."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from trainclock.errors import UsageError
from trainclock.workload import evidence
from trainclock.workload.base import Direction, QualityTarget, TargetSource


@dataclass(frozen=True, kw_only=True)
class MemberSpec:
    """The fields the generic code reads from every benchmark's spec. Keyword-only, so that a
    subclass's own fields keep their order and defaults."""

    name: str
    global_batch_size: int
    micro_batch_size: int
    quality: tuple[QualityTarget, ...]  # every metric that must hold at one evaluation
    target_source: TargetSource
    target_note: str = ""  # how the target was fixed, in a line (the rules' round, the reference runs' summary)

    @property
    def targets(self) -> dict[str, float]:
        """Each quality metric's threshold, by metric name."""
        return {t.metric: t.threshold for t in self.quality}


def rules_target(metrics: Sequence[tuple[str, Direction, float]], note: str) -> dict[str, Any]:
    """The target fields of a member that follows the rules: their thresholds, as given."""
    return {"quality": tuple(QualityTarget(metric, value, direction) for metric, direction, value in metrics),
            "target_source": TargetSource.MLPERF, "target_note": note}


def recorded_target(package: str, member: str, metrics: Sequence[tuple[str, Direction]]) -> dict[str, Any]:
    """The target fields of a member whose thresholds its reference runs fixed (targets/<member>.json
    in `package`): measured where runs stand behind them, else estimated. A single-metric file
    recorded before targets were keyed by metric is read by its one top-level target_* number."""
    recorded = evidence.load(package, member)
    quality = tuple(QualityTarget(metric, evidence.threshold(recorded, metric), direction)
                    for metric, direction in metrics)
    source = TargetSource.MEASURED if evidence.is_measured(recorded) else TargetSource.ESTIMATED
    return {"quality": quality, "target_source": source, "target_note": recorded["summary"]}


S = TypeVar("S", bound=MemberSpec)


class MemberSet(MutableMapping[str, S], Generic[S]):
    """A benchmark's members by name, smallest first, and the evidence behind their targets.
    Mutable only so that a test can put a variant of a member in its place."""

    def __init__(self, title: str, package: str, specs: Iterable[S]) -> None:
        self.title, self.package = title, package
        self._specs = {s.name: s for s in specs}

    def __getitem__(self, name: str) -> S:
        return self._specs[name]

    def __setitem__(self, name: str, spec: S) -> None:
        self._specs[name] = spec

    def __delitem__(self, name: str) -> None:
        del self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def member(self, name: str) -> S:
        """The member called `name`; a UsageError naming the others where there is none."""
        try:
            return self._specs[name]
        except KeyError:
            raise UsageError(f"unknown {self.title} member {name!r}; choose one of: {', '.join(self._specs)}") from None

    def evidence(self, name: str) -> dict:
        """The recorded reference runs that fixed a member's target (targets/<name>.json)."""
        return evidence.load(self.package, name)

    def measured(self) -> list[S]:
        """The members whose targets reference runs fixed."""
        return [s for s in self._specs.values() if s.target_source is TargetSource.MEASURED]


def division(spec: MemberSpec, dataset: str, rules_dataset: str) -> str:
    """The MLPerf division a run belongs to: closed only when the model and hyperparameters are the
    rules' own (a member whose target is the rules') and it trains on the rules' dataset."""
    return "closed" if spec.target_source is TargetSource.MLPERF and dataset == rules_dataset else "open"
