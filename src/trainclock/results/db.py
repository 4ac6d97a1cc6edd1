"""Opening the results database: which URL, the engine for SQLite or PostgreSQL, and write
transactions that survive other processes writing at the same time.

SQLite is opened in WAL mode (readers never wait for the writer) with a busy timeout, and every
write transaction starts with BEGIN IMMEDIATE: it takes the write lock up front, so two importers
queue for it instead of both reading and then failing to upgrade their locks ("database is
locked", which no timeout cures). What still fails for a moment is retried: a locked SQLite file,
and the unique-key clash of two processes inserting the same new entry or system, which the next
attempt then finds already stored.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from trainclock.errors import DataError, UsageError
from trainclock.results.migrations import Upgrade, migrate
from trainclock.storage import data_home

DB_ENV = "TRAINCLOCK_DB"
SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_S = 5
WRITE_ATTEMPTS = 8
URL_HELP = "use sqlite:///PATH (or a file path) or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
# PostgreSQL SQLSTATEs worth another try: serialization failure, deadlock
POSTGRES_RETRY_STATES = {"40001", "40P01"}

T = TypeVar("T")


def default_url() -> str:
    return f"sqlite:///{data_home() / 'results.db'}"


def resolve_url(db: str | None) -> str:
    """--db, else $TRAINCLOCK_DB, else the SQLite file under the data directory."""
    return db or os.environ.get(DB_ENV) or default_url()


@dataclass
class Store:
    engine: Engine
    url: URL

    @property
    def shown_url(self) -> str:
        """The URL without its password, for messages."""
        return self.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_store(db: str | None = None) -> Store:
    """The store at `db` (a URL or a SQLite file path; None: see resolve_url), migrated to the
    current schema. Close it (or use it as a context manager) when done."""
    store = Store(*_engine(resolve_url(db)))
    try:
        migrate_store(store)
    except BaseException:
        store.close()
        raise
    return store


def migrate_store(store: Store, upgrades: Sequence[Upgrade] | None = None) -> int:
    """migrations.migrate, with a database failure as one line; returns the version found."""
    try:
        return migrate(store.engine, upgrades)
    except DBAPIError as e:
        raise database_error(e, store, "opening the results database") from None


def _engine(text: str) -> tuple[Engine, URL]:
    url = _parse(text)
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url), url
    if backend == "postgresql":
        try:
            # psycopg 3: the driver trainclock installs (SQLAlchemy's default for postgresql:// is psycopg2)
            engine = create_engine(url.set(drivername="postgresql+psycopg"),
                                   connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S})
        except ImportError:  # SQLAlchemy imports the driver when it builds the engine
            raise UsageError("a PostgreSQL database needs the psycopg package: "
                             "install it with `.venv/bin/pip install 'psycopg[binary]'`") from None
        return engine, url
    raise UsageError(f"the results database must be SQLite or PostgreSQL, not {backend!r} "
                     f"({url.render_as_string(hide_password=True)}); {URL_HELP}")


def _parse(text: str) -> URL:
    if "://" not in text:  # a plain path is a SQLite file
        return URL.create("sqlite", database=str(Path(text).expanduser()))
    if text.startswith("postgres://"):  # the spelling some hosting services hand out
        text = "postgresql://" + text.removeprefix("postgres://")
    try:
        url = make_url(text)
        url.get_backend_name()
        return url
    except (ArgumentError, ValueError, NoSuchModuleError) as e:
        raise UsageError(f"bad database URL {text.split('@')[-1]!r} ({e}); {URL_HELP}") from None


def _sqlite_engine(url: URL) -> Engine:
    if url.database and url.database != ":memory:":
        folder = Path(url.database).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DataError(f"cannot create the folder {folder} for the results database: {e.strerror}; "
                            "choose another place with --db or TRAINCLOCK_DB") from None
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # the driver's own implicit BEGIN would come too late for BEGIN IMMEDIATE: the "begin" hook issues it
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")  # kept in the file: a no-op once set
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("write") else "BEGIN")

    return engine


def write(store: Store, work: Callable[[Session], T], what: str) -> T:
    """Run `work` in one write transaction: all of it is committed or none. Transient failures
    (a locked SQLite file, two processes inserting the same row) roll back and try again."""
    engine = store.engine.execution_options(write=True)
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            with Session(engine, expire_on_commit=False) as session, session.begin():
                return work(session)
        except DBAPIError as e:
            if attempt == WRITE_ATTEMPTS or not _transient(e):
                raise database_error(e, store, what) from None
        # back off with jitter so that processes which collided do not collide again
        time.sleep(random.uniform(0.01, 0.05) * attempt)
    raise AssertionError("unreachable")


def read(store: Store, work: Callable[[Session], T], what: str) -> T:
    try:
        # loaded rows stay readable after the transaction, for printing
        with Session(store.engine, expire_on_commit=False) as session, session.begin():
            return work(session)
    except DBAPIError as e:
        raise database_error(e, store, what) from None


def _transient(e: DBAPIError) -> bool:
    # an IntegrityError is a concurrent insert of the same key; a real clash repeats and fails in the end
    return isinstance(e, IntegrityError) or _busy(e)


def _busy(e: DBAPIError) -> bool:
    message = str(e.orig).lower()
    if "database is locked" in message or "database is busy" in message or "database table is locked" in message:
        return True
    return getattr(e.orig, "sqlstate", None) in POSTGRES_RETRY_STATES


def database_error(e: DBAPIError, store: Store, what: str) -> DataError:
    """A database failure as one line: what was being done, where, what the driver said, and what to do."""
    said = (str(e.orig).strip().splitlines() or [type(e.orig).__name__])[0]
    if _busy(e):
        hint = "other processes kept the database busy through every retry; try again when they are done"
    elif isinstance(e, OperationalError) and not store.is_sqlite:
        hint = "check that the server runs and accepts this user, or fix --db / TRAINCLOCK_DB"
    elif isinstance(e, OperationalError):
        hint = "check that the file is a trainclock results database on a writable disk, or choose another with --db"
    else:
        hint = "the database refused the data; report this with the file being imported"
    return DataError(f"{what} failed on {store.shown_url}: {said}; {hint}")
