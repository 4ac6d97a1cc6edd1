"""Schema versions. A new database gets the tables of models.py and the latest version number
(as alembic's "create_all, then stamp head"); an older one runs the upgrades from its version on,
in order, each in the same transaction as its version row, so a failed upgrade changes nothing.

Changing the schema: edit models.py, append an upgrade function to UPGRADES that brings a
database of the previous version to the new one (ALTER TABLE ...), and the version goes up by one.
tests/results/test_migrations.py checks that both paths give the same tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, inspect, select, text
from sqlalchemy.exc import DBAPIError

from trainclock.errors import DataError
from trainclock.results.db import Store, database_error
from trainclock.results.models import Base, SchemaVersion

# UPGRADES[i] brings a database from version i + 1 to version i + 2; version 1 is the first schema
Upgrade = Callable[[Connection], None]
UPGRADES: list[Upgrade] = []
# any constant key: the lock that makes one process at a time create or upgrade a PostgreSQL schema
POSTGRES_MIGRATION_LOCK = 0x7472_6331  # "trc1"


def latest_version(upgrades: Sequence[Upgrade] = UPGRADES) -> int:
    return 1 + len(upgrades)


def migrate(store: Store, upgrades: Sequence[Upgrade] = UPGRADES) -> int:
    """Bring the database to the latest version; returns the version it had before (0: new)."""
    try:
        with store.engine.connect() as conn:  # the common case, read only: already up to date
            found = current_version(conn)
        if found == latest_version(upgrades):
            return found
        # a write transaction, checking again inside it: on SQLite, BEGIN IMMEDIATE keeps other
        # processes out; on PostgreSQL, whose DDL is transactional too, an advisory lock does
        with store.engine.execution_options(write=True).begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": POSTGRES_MIGRATION_LOCK})
            return _migrate(conn, upgrades)
    except DBAPIError as e:
        raise database_error(e, store, "opening the results database") from None


def current_version(conn: Connection) -> int:
    if not inspect(conn).has_table(SchemaVersion.__tablename__):
        return 0
    return conn.scalar(select(SchemaVersion.version).order_by(SchemaVersion.version.desc()).limit(1)) or 0


def _migrate(conn: Connection, upgrades: Sequence[Upgrade]) -> int:
    latest = latest_version(upgrades)
    found = current_version(conn)
    if found == 0:
        tables = inspect(conn).get_table_names()
        if tables:
            raise DataError(f"the database holds tables ({', '.join(sorted(tables)[:5])}) but no trainclock "
                            "schema_version: it is not a trainclock results database; choose another with --db")
        Base.metadata.create_all(conn)
        _stamp(conn, latest)
    elif found > latest:
        raise DataError(f"the results database is at schema version {found}, newer than this trainclock knows "
                        f"({latest}); upgrade trainclock, or choose another database with --db")
    for version in range(found + 1, latest + 1) if found else ():
        upgrades[version - 2](conn)
        _stamp(conn, version)
    return found


def _stamp(conn: Connection, version: int) -> None:
    conn.execute(SchemaVersion.__table__.insert().values(version=version, applied_at=datetime.now(UTC)))
