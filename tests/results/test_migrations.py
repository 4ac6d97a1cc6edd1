"""Schema versions: a new database is created at the latest version, an older one is upgraded in
order, and a failed upgrade changes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, inspect, select, text

from trainclock.errors import DataError
from trainclock.results.db import open_store, read
from trainclock.results.importer import import_paths
from trainclock.results.migrations import current_version, latest_version, migrate
from trainclock.results.models import Base, Entry, SchemaVersion


def version_of(store) -> int:
    with store.engine.connect() as conn:
        return current_version(conn)


def test_a_new_database_has_the_models_tables_at_the_latest_version(db_url):
    with open_store(db_url) as store:
        assert version_of(store) == latest_version() == 1
        with store.engine.connect() as conn:
            found = {name: {c["name"] for c in inspect(conn).get_columns(name)} for name in inspect(conn).get_table_names()}
    assert found == {table.name: {c.name for c in table.columns} for table in Base.metadata.sorted_tables}


def add_notes_column(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE entries ADD COLUMN notes TEXT"))
    conn.execute(text("UPDATE entries SET notes = 'migrated'"))


def broken_upgrade(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE entries ADD COLUMN half_done TEXT"))
    raise RuntimeError("the upgrade failed half-way")


def test_an_older_database_is_upgraded_in_order_and_keeps_its_rows(db_url, shared_results):
    import_paths([shared_results / "v3.0"], db_url)
    with open_store(db_url) as store:
        assert migrate(store, [add_notes_column]) == 1  # the version it had
        assert version_of(store) == 2
        notes = read(store, lambda s: s.execute(text("SELECT notes FROM entries")).scalars().all(), "r")
        versions = read(store, lambda s: s.scalars(select(SchemaVersion.version)).all(), "r")
        assert notes == ["migrated", "migrated"] and sorted(versions) == [1, 2]
        assert migrate(store, [add_notes_column]) == 2  # nothing left to do


def test_a_failed_upgrade_changes_nothing(db_url, shared_results):
    import_paths([shared_results / "v3.0"], db_url)
    with open_store(db_url) as store:
        with pytest.raises(RuntimeError, match="half-way"):
            migrate(store, [broken_upgrade])
        assert version_of(store) == 1
        with store.engine.connect() as conn:
            assert "half_done" not in {c["name"] for c in inspect(conn).get_columns("entries")}
        assert len(read(store, lambda s: s.scalars(select(Entry)).all(), "r")) == 2


def test_a_database_newer_than_this_trainclock_is_refused(db_url):
    with open_store(db_url) as store:
        migrate(store, [add_notes_column])
    with pytest.raises(DataError, match="schema version 2, newer than this trainclock knows \\(1\\); upgrade trainclock"):
        open_store(db_url)
