"""Schema versions. A new database gets the tables of models.py and the latest version number
(as alembic's "create_all, then stamp head"); an older one runs the upgrades from its version on,
in order, each in the same transaction as its version row, so a failed upgrade changes nothing.

Changing the schema: edit models.py, append an upgrade function to UPGRADES that brings a
database of the previous version to the new one (ALTER TABLE ...), and the version goes up by one.
tests/results/test_migrations.py checks that both paths give the same tables, and upgrades a
database written by the first schema's code (tests/results/fixtures/store_v1.sqlite).

This module works on an engine and raises the driver's errors: db.open_store calls it and turns
them into one-line messages (db imports migrations, never the other way round).

Only writers migrate. A reader (db.open_reader) opens the database read-only and refuses any version
but the latest: the old tables cannot be read through the new models without rewriting them, so
it names the command that migrates (`trainclock results migrate`, or any import).

Versions:
  1  the first schema (one benchmark, counted in tokens: runs.tokens_to_converge)
  2  unit-neutral: runs.converged_at -> units_to_converge (tokens_to_converge folded in, dropped),
     runs.units_per_sample, runs.metrics, entries.progress_unit, entries.metrics
  3  runs.eval_spans: each evaluation's start and stop in the timed region (from the log, where
     it is still where it was imported from, unchanged)
  4  entries.summarizer_minutes: the score the official summarizer prints, beside trainclock's
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import JSON, Connection, Double, Engine, String, bindparam, inspect, select, text
from sqlalchemy.types import TypeEngine

from trainclock.errors import DataError
from trainclock.results.models import Base, SchemaVersion
from trainclock.results.records import file_sha256, run_record
from trainclock.results.unit_facts import entry_facts, run_facts
from trainclock.review.run_review import review_log

Upgrade = Callable[[Connection], None]
# any constant key: the lock that makes one process at a time create or upgrade a PostgreSQL schema
POSTGRES_MIGRATION_LOCK = 0x7472_6331  # "trc1"


def latest_version(upgrades: Sequence[Upgrade] | None = None) -> int:
    return 1 + len(UPGRADES if upgrades is None else upgrades)


def migrate(engine: Engine, upgrades: Sequence[Upgrade] | None = None) -> int:
    """Bring the database to the latest version; returns the version it had before (0: new).
    Raises the driver's DBAPIError, or DataError for a database that is not trainclock's."""
    upgrades = UPGRADES if upgrades is None else upgrades
    with engine.connect() as conn:  # the common case, read only: already up to date
        found = stored_version(conn, upgrades)
    if found == latest_version(upgrades):
        return found
    # a write transaction, checking again inside it: on SQLite, BEGIN IMMEDIATE keeps other
    # processes out; on PostgreSQL, whose DDL is transactional too, an advisory lock does
    with engine.execution_options(write=True).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": POSTGRES_MIGRATION_LOCK})
        return _migrate(conn, upgrades)


def current_version(conn: Connection) -> int:
    if not inspect(conn).has_table(SchemaVersion.__tablename__):
        return 0
    return conn.scalar(select(SchemaVersion.version).order_by(SchemaVersion.version.desc()).limit(1)) or 0


def stored_version(conn: Connection, upgrades: Sequence[Upgrade] | None = None) -> int:
    """The version of a trainclock database (0: empty), by reading alone; DataError for another
    application's database or one newer than this code. Checked before anything is written, so
    that a database which is not ours is left exactly as it was found."""
    found = current_version(conn)
    if found == 0:
        tables = inspect(conn).get_table_names()
        if tables:  # PostgreSQL reads each statement at its own snapshot: another process may have just
            found = current_version(conn)  # committed the whole schema between the two reads
        if tables and found == 0:
            raise DataError(f"the database holds tables ({', '.join(sorted(tables)[:5])}) but no trainclock "
                            "schema_version: it is not a trainclock results database; choose another with --db")
    latest = latest_version(upgrades)
    if found > latest:
        raise DataError(f"the results database is at schema version {found}, newer than this trainclock knows "
                        f"({latest}); upgrade trainclock, or choose another database with --db")
    return found


def _migrate(conn: Connection, upgrades: Sequence[Upgrade]) -> int:
    latest = latest_version(upgrades)
    found = stored_version(conn, upgrades)
    if found == 0:
        Base.metadata.create_all(conn)
        _stamp(conn, latest)
    for version in range(found + 1, latest + 1) if found else ():
        upgrades[version - 2](conn)
        _stamp(conn, version)
    return found


def _stamp(conn: Connection, version: int) -> None:
    conn.execute(SchemaVersion.__table__.insert().values(version=version, applied_at=datetime.now(UTC)))


def _add_column(conn: Connection, table: str, column: str, type_: TypeEngine) -> None:
    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {type_.compile(dialect=conn.dialect)}"))


def _v2_unit_neutral(conn: Connection) -> None:
    """Version 1 -> 2: progress in the run's own unit instead of tokens, and the quality metrics
    with their direction. Every row stays; the new columns are filled from what version 1 kept
    (each run's header, progress unit and convergence point, its entry's MLPerf benchmark)."""
    # converged_at was the progress at convergence in progress_unit; tokens_to_converge the same
    # number for token-counting runs: one column keeps both
    conn.execute(text("ALTER TABLE runs RENAME COLUMN converged_at TO units_to_converge"))
    conn.execute(text("UPDATE runs SET units_to_converge = tokens_to_converge "
                      "WHERE units_to_converge IS NULL AND tokens_to_converge IS NOT NULL"))
    conn.execute(text("ALTER TABLE runs DROP COLUMN tokens_to_converge"))
    _add_column(conn, "runs", "units_per_sample", Double())
    _add_column(conn, "runs", "metrics", JSON())
    _add_column(conn, "entries", "progress_unit", String(16))
    _add_column(conn, "entries", "metrics", JSON())
    runs = conn.execute(text("SELECT runs.id, runs.entry_id, runs.header, runs.progress_unit, runs.units_to_converge, "
                             "runs.samples_to_converge, entries.mlperf_benchmark FROM runs "
                             "JOIN entries ON entries.id = runs.entry_id ORDER BY runs.id")
                        .columns(header=JSON())).all()
    by_entry: dict[int, list[dict]] = {}
    updates = []
    for run in runs:
        facts = run_facts(run.header if isinstance(run.header, dict) else {}, run.mlperf_benchmark,
                          run.progress_unit, run.units_to_converge, run.samples_to_converge)
        updates.append({"run_id": run.id, **facts})
        by_entry.setdefault(run.entry_id, []).append(facts)
    if updates:
        conn.execute(text("UPDATE runs SET progress_unit = :progress_unit, units_per_sample = :units_per_sample, "
                          "metrics = :metrics WHERE id = :run_id").bindparams(bindparam("metrics", type_=JSON())),
                     updates)
    entries = [{"entry_id": entry_id, **entry_facts(facts)} for entry_id, facts in by_entry.items()]
    if entries:
        conn.execute(text("UPDATE entries SET progress_unit = :progress_unit, metrics = :metrics WHERE id = :entry_id")
                     .bindparams(bindparam("metrics", type_=JSON())), entries)


def _v3_eval_spans(conn: Connection) -> None:
    """Version 2 -> 3: runs.eval_spans, read again from each run's log where that file is still
    at its imported path with the same content (the store keeps no events; other runs keep NULL)."""
    _add_column(conn, "runs", "eval_spans", JSON())
    updates = []
    for run in conn.execute(text("SELECT runs.id, runs.path, runs.size_bytes, runs.sha256, entries.round FROM runs "
                                 "JOIN entries ON entries.id = runs.entry_id ORDER BY runs.id")).all():
        path = Path(run.path)
        try:
            if path.stat().st_size != run.size_bytes or file_sha256(path) != run.sha256:
                continue
            spans = run_record(review_log(path, run.round)).values["eval_spans"]
        except (OSError, DataError):
            continue  # moved, changed or unreadable: the run keeps no part timing
        if spans is not None:
            updates.append({"run_id": run.id, "spans": spans})
    if updates:
        conn.execute(text("UPDATE runs SET eval_spans = :spans WHERE id = :run_id")
                     .bindparams(bindparam("spans", type_=JSON())), updates)


def _v4_summarizer_score(conn: Connection) -> None:
    """Version 3 -> 4: entries.summarizer_minutes. Where trainclock scored an entry the summarizer
    prints the same figure; where it did not, the summarizer's is known only from a new import of
    the entry (NULL until then, as for an entry it prints no score for)."""
    _add_column(conn, "entries", "summarizer_minutes", Double())
    conn.execute(text("UPDATE entries SET summarizer_minutes = score_minutes"))


# UPGRADES[i] brings a database from version i + 1 to version i + 2; version 1 is the first schema
UPGRADES: list[Upgrade] = [_v2_unit_neutral, _v3_eval_spans, _v4_summarizer_score]
