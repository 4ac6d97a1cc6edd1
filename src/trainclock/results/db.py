"""Opening the results database: which URL, the engine for SQLite or PostgreSQL, and write
transactions that survive other processes writing at the same time.

SQLite is opened in WAL mode (readers never wait for the writer) with a busy timeout, and every
write transaction starts with BEGIN IMMEDIATE: it takes the write lock up front, so two importers
queue for it instead of both reading and then failing to upgrade their locks ("database is
locked", which no timeout cures). What still fails for a moment is retried: a locked SQLite file,
and the unique-key clash of two processes inserting the same new entry or system, which the next
attempt then finds already stored.

Writers (`open_store`: import, `trainclock run`'s import, migrate) create the database if it is
missing and migrate it. Readers (`open_reader`: results list/show/compare, report, serve) never
write: the database must exist at the current schema version, SQLite is opened with mode=ro (and
`PRAGMA query_only`), PostgreSQL sessions are read-only. Before a writer changes anything (WAL
mode, tables) the file is checked read-only, so another application's database is refused
untouched. A store that would keep nothing (`sqlite://`, `:memory:`) is refused by both.

A read-only SQLite file in WAL mode needs its -shm companion, which SQLite cannot create in a
folder the user cannot write: such a store is then read with immutable=1 (no locks), which is
exact as long as nobody with write access changes it meanwhile, and is refused if its -wal file
holds changes immutable would not see. In a writable folder a reader may leave SQLite's empty
-wal and -shm companions beside the file; the database file itself is never written.
"""

from __future__ import annotations

import os
import random
import shlex
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, DBAPIError, IntegrityError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session

from trainclock.errors import DataError, UsageError
from trainclock.results.migrations import Upgrade, latest_version, migrate, stored_version
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
    readonly: bool = False
    found_version: int | None = None  # the schema version found on opening (0: created now)

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


def open_store(db: str | None = None, *, create: bool = True) -> Store:
    """The store at `db` (a URL or a SQLite file path; None: see resolve_url) for writing,
    migrated to the current schema; created if missing unless `create` is False. Close it (or use
    it as a context manager) when done."""
    url = parse_url(db)
    if url.get_backend_name() == "sqlite":
        path = Path(url.database)
        _refuse_folder(path)
        if path.is_file() and path.stat().st_size:
            # read-only first: opening for writing switches the file to WAL before migrate can look
            _reader(url).close()
        elif not create:
            raise _missing(path, url)
    store = Store(*_engine(url))
    try:
        if not create and not store.is_sqlite and _version(store) == 0:
            raise _missing(None, url)
        store.found_version = migrate_store(store)
    except BaseException:
        store.close()
        raise
    return store


def open_reader(db: str | None = None) -> Store:
    """The store at `db` for reading only: it must exist at the current schema version; nothing
    is created, migrated or written. DataError (one line, naming the database) otherwise."""
    url = parse_url(db)
    store = _reader(url)
    latest = latest_version()
    try:
        if store.found_version == 0:
            raise _missing(Path(url.database) if store.is_sqlite else None, url)
        if store.found_version < latest:
            raise DataError(f"the results database {store.shown_url} is at schema version {store.found_version}, "
                            f"older than this trainclock reads ({latest}); a reader never changes it: migrate it in "
                            f"place, keeping every row, with `trainclock results migrate --db {_quoted(store)}` "
                            "(or any `trainclock results import` into it)")
    except BaseException:
        store.close()
        raise
    return store


def check_url(db: str | None) -> str:
    """Refuse now a --db that could never keep a run (bad URL, unknown backend, a store in
    memory), before hours of training; returns it for messages."""
    url = parse_url(db)
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        _engine(url)  # raises the usual message
    return url.render_as_string(hide_password=True)


def migrate_store(store: Store, upgrades: Sequence[Upgrade] | None = None) -> int:
    """migrations.migrate, with a database failure as one line; returns the version found."""
    if store.readonly:
        raise AssertionError("a store opened for reading is never migrated")
    try:
        return migrate(store.engine, upgrades)
    except DBAPIError as e:
        raise database_error(e, store, "opening the results database") from None


def parse_url(db: str | None) -> URL:
    """The database URL of --db (see resolve_url); UsageError for a bad one or one that keeps nothing."""
    if db is not None and not db.strip():
        raise UsageError(f"--db is empty; {URL_HELP}")
    text = resolve_url(db)
    url = _parse(text)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        if url.query.get("uri") in ("true", "1") or database.startswith("file:"):
            raise UsageError(f"give the results database as a path or sqlite:///PATH, not as a SQLite URI "
                             f"({text}): trainclock chooses how to open the file")
        if database.strip() in ("", ":memory:"):
            raise UsageError(f"{text!r} is a SQLite database in memory, which keeps nothing once the command "
                             "ends; give a file: sqlite:///PATH or a plain path")
    return url


def _engine(url: URL) -> tuple[Engine, URL]:
    backend = url.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(url), url
    if backend == "postgresql":
        return _postgres_engine(url), url
    raise UsageError(f"the results database must be SQLite or PostgreSQL, not {backend!r} "
                     f"({url.render_as_string(hide_password=True)}); {URL_HELP}")


def _postgres_engine(url: URL, readonly: bool = False) -> Engine:
    try:
        # psycopg 3: the driver trainclock installs (SQLAlchemy's default for postgresql:// is psycopg2)
        engine = create_engine(url.set(drivername="postgresql+psycopg"),
                               connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S})
    except ImportError:  # SQLAlchemy imports the driver when it builds the engine
        raise UsageError("a PostgreSQL database needs the psycopg package: "
                         "install it with `.venv/bin/pip install 'psycopg[binary]'`") from None
    if readonly:
        @event.listens_for(engine, "connect")
        def _read_only(dbapi_connection, _record) -> None:
            dbapi_connection.read_only = True  # the server refuses any write in this session's transactions
    return engine


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

    _begin_explicitly(engine)
    return engine


def _begin_explicitly(engine: Engine) -> None:
    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        # a reader's BEGIN too: its queries then see one snapshot, not one per statement
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get("write") else "BEGIN")


def _reader(url: URL) -> Store:
    """A read-only store at `url` whose schema version was read (found_version), refusing a
    database of another application or a newer trainclock; nothing is created or changed."""
    if url.get_backend_name() == "sqlite":
        path = Path(url.database)
        _refuse_folder(path)
        if not path.exists():
            raise _missing(path, url)
        store = Store(_sqlite_read_engine(path, _read_only_uri(path, url)), url, readonly=True)
    elif url.get_backend_name() == "postgresql":
        store = Store(_postgres_engine(url, readonly=True), url, readonly=True)
    else:
        _engine(url)  # raises the message for an unknown backend
        raise AssertionError("unreachable")
    try:
        store.found_version = _version(store)
    except BaseException:
        store.close()
        raise
    return store


def _version(store: Store) -> int:
    try:
        with store.engine.connect() as conn:
            return stored_version(conn)
    except DataError as e:
        raise DataError(f"{store.url.database if store.is_sqlite else store.shown_url}: {e}") from None
    except DatabaseError as e:
        if _not_a_database(e.orig):
            raise _not_sqlite(store.url) from None
        raise database_error(e, store, "opening the results database") from None


def _read_only_uri(path: Path, url: URL) -> str:
    """The SQLite URI that reads `path` without writing: mode=ro, or immutable=1 where mode=ro
    cannot work (a WAL file in a folder this user cannot write, with no -wal changes to miss)."""
    base = "file:" + quote(str(path.absolute()))
    try:
        _probe(f"{base}?mode=ro")
        return f"{base}?mode=ro"
    except sqlite3.DatabaseError as e:
        if _not_a_database(e):
            raise _not_sqlite(url) from None
        failure = e
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise DataError(f"cannot read the results database {path}: its write-ahead log {wal} holds changes that "
                        f"only a process allowed to write in {path.parent} can read; run a write command on it "
                        f"once as its owner (`trainclock results migrate --db {path}`), or make the folder writable")
    uri = f"{base}?immutable=1"
    try:
        _probe(uri)
    except sqlite3.DatabaseError:
        raise DataError(f"cannot read the results database {path}: {failure}; check that this user may read "
                        "the file and its folder") from None
    return uri


def _probe(uri: str) -> None:
    connection = sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        connection.close()


def _sqlite_read_engine(path: Path, uri: str) -> Engine:
    def connect() -> sqlite3.Connection:
        # the web server's threads share the pool; each connection is used by one thread at a time
        return sqlite3.connect(uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)

    # the URL names the file so that SQLAlchemy pools as for a file (the creator does the opening)
    engine = create_engine(URL.create("sqlite", database=str(path)), creator=connect)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA query_only = ON")  # a second guard: this connection refuses every write
        cursor.close()

    _begin_explicitly(engine)
    return engine


def _refuse_folder(path: Path) -> None:
    if path.is_dir():
        raise DataError(f"{path} is a folder; the results database is a file in it, e.g. --db {path / 'results.db'}")


def _missing(path: Path | None, url: URL) -> DataError:
    where = f"at {path}" if path is not None else f"in {url.render_as_string(hide_password=True)}"
    return DataError(f"no trainclock results database {where}: nothing has been imported there; "
                     "`trainclock results import PATH` (with the same --db) creates it, or fix --db / TRAINCLOCK_DB")


def _not_a_database(e: BaseException | None) -> bool:
    return getattr(e, "sqlite_errorname", None) == "SQLITE_NOTADB"


def _not_sqlite(url: URL) -> DataError:
    return DataError(f"{url.database} is not a SQLite file (SQLite: file is not a database), so not a trainclock "
                     "results database; choose another with --db")


def _quoted(store: Store) -> str:
    return shlex.quote(store.url.database if store.is_sqlite else store.shown_url)


def write(store: Store, work: Callable[[Session], T], what: str) -> T:
    """Run `work` in one write transaction: all of it is committed or none. Transient failures
    (a locked SQLite file, two processes inserting the same row) roll back and try again."""
    if store.readonly:
        raise AssertionError("a store opened for reading is never written: open it with open_store")
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
    elif isinstance(e, OperationalError) and store.readonly:
        hint = "check that this user may read the file and its folder, or choose another with --db"
    elif isinstance(e, OperationalError):
        hint = "check that the file is a trainclock results database on a writable disk, or choose another with --db"
    else:
        hint = "the database refused the data; report this with the file being imported"
    return DataError(f"{what} failed on {store.shown_url}: {said}; {hint}")
