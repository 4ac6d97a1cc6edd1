"""Opening the results store: writers (import, run's import, migrate) create and migrate it;
readers (results list/show/compare, report, serve) never write to it, refuse a store that does not
exist or needs migrating, and can read a store this user may not write. A store that would keep
nothing is refused by all; a file of another application is refused untouched."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from trainclock.errors import DataError, UsageError
from trainclock.results.db import check_url, migrate_store, open_reader, open_store, read
from trainclock.results.importer import import_paths, import_run
from trainclock.results.migrations import UPGRADES, latest_version

from results.test_migrations import V1_FIXTURE, add_notes_column

IN_MEMORY = ["sqlite:///", "sqlite:///:memory:", ":memory:", "sqlite://"]
# each command that takes --db, with what else it needs (PATH: something to import)
DB_COMMANDS = {
    "import": ["results", "import", "PATH"],
    "list": ["results", "list"],
    "show": ["results", "show", "1"],
    "compare": ["results", "compare"],
    "migrate": ["results", "migrate"],
    "report": ["report", "--out", "OUT"],
    "serve": ["serve", "--port", "0"],
}
READERS = ["list", "show", "compare", "report", "serve"]
# dropping these leaves root as bound by file modes as any user
DAC_CAPABILITIES = "-dac_override,-dac_read_search"


def command(name: str, db: str, tmp_path: Path, shared_results: Path) -> list[str]:
    argv = [str(shared_results / "v3.0") if a == "PATH" else str(tmp_path / "report") if a == "OUT" else a
            for a in DB_COMMANDS[name]]
    return [*argv, "--db", db]


def one_line_error(result: tuple[int, str, str]) -> str:
    code, out, err = result
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("trainclock: error: ")
    return line


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- a store that keeps nothing (fault 8) ---------------------------------------------------------

@pytest.mark.parametrize("url", IN_MEMORY)
@pytest.mark.parametrize("name", list(DB_COMMANDS))
def test_a_store_in_memory_is_refused_by_every_command(cli, url, name, tmp_path, shared_results):
    line = one_line_error(cli(*command(name, url, tmp_path, shared_results)))
    assert "in memory, which keeps nothing" in line and "sqlite:///PATH" in line


@pytest.mark.parametrize("url", IN_MEMORY)
def test_runs_import_refuses_a_store_in_memory_and_can_check_it_first(url, shared_results):
    log = next((shared_results / "v3.0").glob("*/results/*/gpt3/result_0.txt"))
    with pytest.raises(UsageError, match="keeps nothing"):
        import_run(log, url)
    with pytest.raises(UsageError, match="keeps nothing"):
        check_url(url)


def test_check_url_accepts_what_can_keep_a_run(tmp_path):
    assert check_url(str(tmp_path / "results.db")) == f"sqlite:///{tmp_path / 'results.db'}"
    assert not (tmp_path / "results.db").exists()  # checking creates nothing
    with pytest.raises(UsageError, match="not 'mysql'"):
        check_url("mysql://user@host/db")


# --- reading a store that does not exist (fault 9) ------------------------------------------------

@pytest.mark.parametrize("name", READERS)
def test_reading_a_missing_store_is_an_error_and_creates_nothing(cli, name, tmp_path, shared_results):
    db = tmp_path / "typo" / "dir" / "results.db"
    line = one_line_error(cli(*command(name, str(db), tmp_path, shared_results)))
    assert f"no trainclock results database at {db}" in line and "trainclock results import PATH" in line
    assert not (tmp_path / "typo").exists()


def test_migrate_needs_an_existing_store(cli, tmp_path, shared_results):
    db = tmp_path / "nowhere" / "results.db"
    assert "no trainclock results database" in one_line_error(cli(*command("migrate", str(db), tmp_path, shared_results)))
    assert not db.parent.exists()


def test_import_still_creates_the_store_and_its_folders(cli, tmp_path, shared_results):
    db = tmp_path / "new" / "dir" / "results.db"
    code, out, err = cli(*command("import", str(db), tmp_path, shared_results))
    assert code == 0, err
    assert db.is_file()
    code, out, err = cli(*command("list", str(db), tmp_path, shared_results))
    assert code == 0 and "10.940" in out


def test_an_empty_database_is_no_store_to_read(db_url):
    """An empty SQLite file or PostgreSQL schema: the reader says so, and creates no tables."""
    if db_url.startswith("sqlite"):
        Path(db_url.removeprefix("sqlite:///")).touch()
    with pytest.raises(DataError, match="no trainclock results database .*trainclock results import PATH"):
        open_reader(db_url)
    with open_store(db_url) as store:  # a writer finds it still empty, and creates the tables
        assert store.found_version == 0


# --- reading without writing (fault 10) -----------------------------------------------------------

def test_a_reader_never_writes(db_url, shared_results):
    import_paths([shared_results / "v3.0"], db_url)
    with open_reader(db_url) as store:
        assert store.readonly
        with pytest.raises(DataError, match="read-only|readonly"):
            read(store, lambda s: s.execute(text("DELETE FROM entries")), "deleting")
        assert len(read(store, lambda s: s.execute(text("SELECT id FROM entries")).all(), "counting")) == 2


def test_reading_leaves_the_sqlite_file_as_it_was(cli, tmp_path, shared_results):
    db = tmp_path / "results.db"
    import_paths([shared_results / "v3.0"], str(db))
    before, modified = digest(db), db.stat().st_mtime_ns
    for name in ("list", "show", "compare", "report"):
        code, out, err = cli(*command(name, str(db), tmp_path, shared_results))
        assert code == 0, err
    assert digest(db) == before and db.stat().st_mtime_ns == modified


def as_unprivileged(argv: list[str], folder: Path) -> list[str]:
    """argv run so that file modes bind it: as is for a plain user; root without the capabilities
    that override them (skips where that is not possible here)."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: cannot drop the right to write anywhere")
    wrapped = [setpriv, f"--inh-caps={DAC_CAPABILITIES}", f"--bounding-set={DAC_CAPABILITIES}", "--"]
    probe = subprocess.run([*wrapped, sys.executable, "-c", f"open({str(folder / 'probe')!r}, 'w')"],
                           capture_output=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("cannot drop root's right to write into a read-only folder here")
    return [*wrapped, *argv]


@pytest.fixture
def read_only_store(tmp_path, shared_results):
    """A store imported as usual (WAL mode, no -wal or -shm left), then made read-only, file and folder."""
    folder = tmp_path / "archive"
    db = folder / "results.db"
    import_paths([shared_results / "v3.0"], str(db))
    assert sorted(p.name for p in folder.iterdir()) == ["results.db"]
    db.chmod(0o444)
    folder.chmod(0o555)
    yield db
    folder.chmod(0o755)
    db.chmod(0o644)


@pytest.mark.parametrize("name, shows", [("list", "311.945"), ("show", "HLS-Gaudi2-N48-PT"),
                                         ("compare", "10.940"), ("report", "report written to")])
def test_a_store_this_user_cannot_write_can_be_read(read_only_store, name, shows, tmp_path, shared_results):
    before = digest(read_only_store)
    argv = as_unprivileged([sys.executable, "-m", "trainclock.cli",
                            *command(name, str(read_only_store), tmp_path, shared_results)], read_only_store.parent)
    env = {**os.environ, "COLUMNS": "250"}  # rich wraps to the terminal width
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert shows in done.stdout and "readonly" not in done.stderr
    assert digest(read_only_store) == before
    assert sorted(p.name for p in read_only_store.parent.iterdir()) == ["results.db"]


def test_an_old_store_is_not_migrated_by_a_reader(cli, tmp_path, shared_results):
    db = tmp_path / "v1.db"
    shutil.copy(V1_FIXTURE, db)
    before = digest(db)
    for name in READERS:
        line = one_line_error(cli(*command(name, str(db), tmp_path, shared_results)))
        assert f"schema version 1, older than this trainclock reads ({latest_version()})" in line
        assert f"trainclock results migrate --db {db}" in line
    assert digest(db) == before
    code, out, err = cli(*command("migrate", str(db), tmp_path, shared_results))
    assert code == 0 and f"migrated from schema version 1 to {latest_version()}, every row kept" in out
    code, out, err = cli(*command("migrate", str(db), tmp_path, shared_results))
    assert code == 0 and f"at schema version {latest_version()} already" in out
    code, out, err = cli(*command("list", str(db), tmp_path, shared_results))
    assert code == 0 and "XE9680x8H100-SXM-80GB" in out


def test_a_newer_store_is_refused_by_readers_too(db_url):
    with open_store(db_url) as store:
        migrate_store(store, [*UPGRADES, add_notes_column])
    with pytest.raises(DataError, match=f"schema version {latest_version() + 1}, newer than this trainclock knows \\({latest_version()}\\); upgrade"):
        open_reader(db_url)


# --- a file of another application (fault 11) -----------------------------------------------------

@pytest.fixture
def foreign_file(tmp_path) -> Path:
    path = tmp_path / "other-app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
        conn.execute("INSERT INTO customers VALUES (1, 'Ada')")
    conn.close()
    return path


def journal_mode(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("name", ["import", *READERS, "migrate"])
def test_a_foreign_sqlite_file_is_refused_untouched(cli, foreign_file, name, tmp_path, shared_results):
    before = digest(foreign_file)
    line = one_line_error(cli(*command(name, str(foreign_file), tmp_path, shared_results)))
    assert f"{foreign_file}: the database holds tables (customers)" in line
    assert "not a trainclock results database" in line
    assert digest(foreign_file) == before and journal_mode(foreign_file) == "delete"
    assert sorted(p.name for p in foreign_file.parent.iterdir()) == ["other-app.db"]


@pytest.mark.parametrize("name", ["import", "list"])
def test_a_file_that_is_not_sqlite_is_refused_untouched(cli, name, tmp_path, shared_results):
    path = tmp_path / "notes.db"
    path.write_bytes(b"not a database at all\n" * 100)
    line = one_line_error(cli(*command(name, str(path), tmp_path, shared_results)))
    assert f"{path} is not a SQLite file" in line
    assert path.read_bytes() == b"not a database at all\n" * 100
