"""Importing reviewed entries into the store: idempotent, one transaction per entry.

A run is its log's content: a log whose sha256 is stored already is never added again, wherever
it lies now. An entry is (round, org, system, benchmark, division): importing it again updates its
score and verdict from the new review, as long as that review covered every run the store has for
it; a review of fewer runs (one log of a complete entry, say) adds its new runs and leaves the
stored score alone, since it would judge the entry on part of its runs.

Each entry is committed on its own, so a failure part-way through a tree keeps the entries already
imported and leaves nothing half-written of the one that failed.

Nothing is stored that does not stand for a run: a file without a single MLLOG event (empty,
binary, another kind of log) is skipped with its reason, and an entry whose logs are all stored
under another entry already (the same tree imported again under a renamed folder) is not created,
since an entry without runs would carry a score nothing backs.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from trainclock.errors import DataError, TrainclockError
from trainclock.mllog.reader import MARKER
from trainclock.review.entry import EntryReview, review_entry
from trainclock.review.tree import entry_context, find_entries, review_path
from trainclock.results.db import Store, open_store, write
from trainclock.results.models import Entry, Eval, Finding, Run, System
from trainclock.results.records import EntryRecord, RunRecord, entry_record

NEW, UPDATED, UNCHANGED = "new", "updated", "unchanged"


@dataclass
class EntryOutcome:
    entry_id: int
    label: str
    status: str  # NEW, UPDATED or UNCHANGED
    runs_added: int
    runs_present: int  # logs already stored
    notes: list[str] = field(default_factory=list)


@dataclass
class ImportReport:
    url: str  # without its password
    outcomes: list[EntryOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # files not imported, and why
    logs: int = 0
    log_bytes: int = 0
    review_seconds: float = 0.0
    store_seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def runs_added(self) -> int:
        return sum(o.runs_added for o in self.outcomes)

    @property
    def runs_present(self) -> int:
        return sum(o.runs_present for o in self.outcomes)

    @property
    def entry_ids(self) -> list[int]:
        return [o.entry_id for o in self.outcomes]


def import_paths(paths: Sequence[Path], db: str | None = None, round_: str | None = None,
                 rcp_dir: Path | None = None) -> ImportReport:
    """Review everything under `paths` (logs, benchmark folders, result trees) and import it."""
    with open_store(db) as store:  # a bad URL or a server that is down fails before a long review
        started = time.perf_counter()
        entries = []
        for path in paths:
            try:
                entries += review_path(Path(path), round_, rcp_dir)
            except DataError:
                _refuse_long_names_in(Path(path))  # a name too long for a rule file's name fails the review
                raise
        for entry in entries:
            _refuse_long_names(entry)
        reviewed = time.perf_counter()
        report = import_entries(store, entries, rcp_dir)
    report.review_seconds = reviewed - started
    if not report.outcomes and report.skipped:
        more = f" (and {len(report.skipped) - 1} more)" if len(report.skipped) > 1 else ""
        raise DataError(f"nothing imported: {report.skipped[0]}{more}")
    return report


# the header values the store keeps as names, and the review looks rule files up by (<division>_<benchmark>.yaml)
NAMED = ("submission_benchmark", "submission_division", "submission_org", "submission_platform", "trainclock_workload")
MAX_NAME = 200  # characters: the longest real ones are a few dozen; a file name may not pass 255 bytes
_HEADER_BYTES = 1 << 20  # the header (before run_start) is read this far, at most, when a review failed


def _long_name_error(log: Path, key: str, value: str) -> DataError:
    return DataError(f"{log}: its {key} is {len(value):,} characters long; a name may have at most {MAX_NAME}: "
                     "fix the log's header, or leave the log out")


def _refuse_long_names(entry: EntryReview) -> None:
    """A benchmark (org, system, ...) name no real submission has is refused, not stored."""
    for run in entry.runs:
        for key in NAMED:
            value = run.header.get(key)
            if isinstance(value, str) and len(value) > MAX_NAME:
                raise _long_name_error(run.path, key, value)


def _refuse_long_names_in(path: Path) -> None:
    """After a failed review: the log under `path` whose header names something too long, if any."""
    try:
        folders = find_entries(path)
    except (TrainclockError, OSError):
        return
    for _, logs in folders:
        for log in logs:
            try:
                if not log.is_file():  # a FIFO would block the read
                    continue
                with open(log, "rb") as f:
                    head = f.read(_HEADER_BYTES)
            except OSError:
                continue
            for line in head.decode(errors="replace").splitlines():
                _, marker, event = line.partition(MARKER)
                if not marker:
                    continue
                try:
                    record = json.loads(event)
                except ValueError:
                    continue
                key = record.get("key") if isinstance(record, dict) else None
                if key == "run_start":
                    break
                if key in NAMED and isinstance(record.get("value"), str) and len(record["value"]) > MAX_NAME:
                    raise _long_name_error(log, key, record["value"])


def import_run(log_path: Path, db_url: str | None = None) -> ImportReport:
    """Import the run that just wrote `log_path`, as `trainclock run` does at its end. Inside a
    result tree (<out>/results/<system>/<workload>/result_<i>.txt) the whole benchmark folder is
    reviewed, so that the entry is scored on all of its runs; the runs stored already are skipped.
    A log elsewhere is imported alone. Raises a TrainclockError when the log or database fails."""
    log_path = Path(log_path)
    in_tree = log_path.is_file() and entry_context(log_path.parent).system is not None
    return import_paths([log_path.parent if in_tree else log_path], db_url)


def import_entries(store: Store, entries: Sequence[EntryReview], rcp_dir: Path | None = None) -> ImportReport:
    report = ImportReport(store.shown_url)
    started = time.perf_counter()
    for entry in entries:
        junk = [run for run in entry.runs if run.events == 0]
        report.skipped += [f"{run.path}: no :::MLLOG events (an empty, binary or other kind of file); not imported"
                           for run in junk]
        if len(junk) == len(entry.runs):
            continue
        if junk:
            entry = review_entry(entry.context, [run for run in entry.runs if run.events != 0], rcp_dir)
        record = entry_record(entry)  # reads and hashes the logs before the transaction opens
        report.logs += len(record.runs)
        report.log_bytes += sum(r.values["size_bytes"] for r in record.runs)
        report.outcomes.append(write(store, lambda session: _store_entry(session, record), f"importing {record.label}"))
    report.store_seconds = time.perf_counter() - started
    return report


def _store_entry(session: Session, record: EntryRecord) -> EntryOutcome:
    now = datetime.now(UTC)
    runs, notes = _distinct_runs(record)
    owners = dict(session.execute(select(Run.sha256, Run.entry_id).where(Run.sha256.in_([r.sha256 for r in runs]))).all())
    entry = session.scalar(select(Entry).filter_by(**record.key))
    if entry is None and runs and all(run.sha256 in owners for run in runs):
        # the same logs under another name (a renamed system folder): they stay with the entry that has them
        owner = Counter(owners[run.sha256] for run in runs).most_common(1)[0][0]
        notes += [f"{run.values['path']}: the same log is stored under entry #{owners[run.sha256]}; not added again"
                  for run in runs]
        notes.append(f"{record.label}: all its logs are stored under entry #{owner} already; not added as "
                     "a second entry without runs")
        return EntryOutcome(owner, record.label, UNCHANGED, 0, len(runs), notes)
    system_id = _system_id(session, record.system) if record.system else None
    if entry is None:
        entry = Entry(**record.key, **record.values, system_id=system_id, imported_at=now, updated_at=now)
        session.add(entry)
        session.flush()
        status = NEW
    else:
        stored = set(session.scalars(select(Run.sha256).where(Run.entry_id == entry.id)))
        reviewed = {r.sha256 for r in runs}
        if stored <= reviewed:
            status = UPDATED if _update(entry, {**record.values, "system_id": system_id}) else UNCHANGED
        else:
            status = UNCHANGED
            notes.append(f"{record.label}: kept its stored score; this import reviewed {len(reviewed)} of its "
                         f"{len(stored | reviewed)} runs: import its whole benchmark folder to rescore it")
    for run in runs:
        owner = owners.get(run.sha256)
        if owner is not None and owner != entry.id:
            notes.append(f"{run.values['path']}: the same log is stored under entry #{owner}; not added again")
    new_runs = [r for r in runs if r.sha256 not in owners]
    if new_runs:
        _insert_runs(session, entry.id, new_runs, now)
        status = NEW if status == NEW else UPDATED
        entry.updated_at = now
    return EntryOutcome(entry.id, record.label, status, len(new_runs), len(runs) - len(new_runs), notes)


def _distinct_runs(record: EntryRecord) -> tuple[list[RunRecord], list[str]]:
    """The runs with one of each content: two identical files in one folder are one run stored."""
    seen: dict[str, RunRecord] = {}
    notes = []
    for run in record.runs:
        if run.sha256 in seen:
            notes.append(f"{run.values['path']} is a copy of {seen[run.sha256].values['file_name']}; stored once")
        else:
            seen[run.sha256] = run
    return list(seen.values()), notes


def _system_id(session: Session, system: dict) -> int:
    found = session.scalar(select(System.id).where(System.name == system["name"],
                                                   System.description_sha256 == system["description_sha256"]))
    if found is not None:
        return found
    row = System(**system)
    session.add(row)
    session.flush()  # a concurrent insert of the same description fails here, and write() retries
    return row.id


def _update(entry: Entry, values: dict) -> bool:
    changed = {name: value for name, value in values.items() if getattr(entry, name) != value}
    for name, value in changed.items():
        setattr(entry, name, value)
    if changed:
        entry.updated_at = datetime.now(UTC)
    return bool(changed)


def _insert_runs(session: Session, entry_id: int, runs: list[RunRecord], now: datetime) -> None:
    rows = [Run(**run.values, entry_id=entry_id, imported_at=now) for run in runs]
    session.add_all(rows)
    session.flush()  # numbers the runs, for their evaluations and findings
    evals = [{**point, "run_id": row.id} for row, run in zip(rows, runs) for point in run.evals]
    findings = [{**finding, "run_id": row.id} for row, run in zip(rows, runs) for finding in run.findings]
    if evals:
        session.execute(insert(Eval), evals)
    if findings:
        session.execute(insert(Finding), findings)
