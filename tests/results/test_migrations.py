"""Schema versions: a new database is created at the latest version, an older one is upgraded in
order, a failed upgrade changes nothing, and a database written by schema version 1's code
(fixtures/store_v1.sqlite: the official v3.0 gpt3 tree, Dell's v3.1 maskrcnn, rnnt and
stable_diffusion, and a real `trainclock run gpt3-tiny`, imported by the code of version 1) keeps
every row when it becomes unit-neutral (version 2), on SQLite and on PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import Connection, MetaData, create_engine, inspect, select, text

from trainclock.errors import DataError
from trainclock.results.db import migrate_store, open_store, read
from trainclock.results.migrations import UPGRADES, current_version, latest_version
from trainclock.results.models import Base, Entry, Run, SchemaVersion
from trainclock.results.records import file_sha256
from trainclock.review.run_review import review_log

from results import models_v1

V1_FIXTURE = Path(__file__).parent / "fixtures" / "store_v1.sqlite"
V1_TABLES = ("schema_version", "systems", "entries", "runs", "evals", "findings")  # parents first


def version_of(store) -> int:
    with store.engine.connect() as conn:
        return current_version(conn)


def columns(conn: Connection) -> dict[str, set[str]]:
    found = inspect(conn)
    return {name: {c["name"] for c in found.get_columns(name)} for name in found.get_table_names()}


def test_a_new_database_has_the_models_tables_at_the_latest_version(db_url):
    with open_store(db_url) as store:
        assert version_of(store) == latest_version() == 4
        with store.engine.connect() as conn:
            found = columns(conn)
    assert found == {table.name: {c.name for c in table.columns} for table in Base.metadata.sorted_tables}


def add_notes_column(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE entries ADD COLUMN notes TEXT"))
    conn.execute(text("UPDATE entries SET notes = 'migrated'"))


def broken_upgrade(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE entries ADD COLUMN half_done TEXT"))
    raise RuntimeError("the upgrade failed half-way")


def test_an_older_database_is_upgraded_in_order_and_keeps_its_rows(db_url, shared_results):
    from trainclock.results.importer import import_paths

    import_paths([shared_results / "v3.0"], db_url)
    with open_store(db_url) as store:
        upgrades = [*UPGRADES, add_notes_column]
        latest = latest_version()
        assert migrate_store(store, upgrades) == latest  # the version it had
        assert version_of(store) == latest + 1
        notes = read(store, lambda s: s.execute(text("SELECT notes FROM entries")).scalars().all(), "r")
        versions = read(store, lambda s: s.scalars(select(SchemaVersion.version)).all(), "r")
        assert notes == ["migrated", "migrated"] and sorted(versions) == [latest, latest + 1]
        assert migrate_store(store, upgrades) == latest + 1  # nothing left to do


def test_a_failed_upgrade_changes_nothing(db_url, shared_results):
    from trainclock.results.importer import import_paths

    import_paths([shared_results / "v3.0"], db_url)
    with open_store(db_url) as store:
        with pytest.raises(RuntimeError, match="half-way"):
            migrate_store(store, [*UPGRADES, broken_upgrade])
        assert version_of(store) == latest_version()
        with store.engine.connect() as conn:
            assert "half_done" not in {c["name"] for c in inspect(conn).get_columns("entries")}
        assert len(read(store, lambda s: s.scalars(select(Entry)).all(), "r")) == 2


def test_a_database_newer_than_this_trainclock_is_refused(db_url):
    with open_store(db_url) as store:
        migrate_store(store, [*UPGRADES, add_notes_column])
    latest = latest_version()
    with pytest.raises(DataError, match=f"schema version {latest + 1}, newer than this trainclock knows \\({latest}\\); upgrade"):
        open_store(db_url)


# --- version 1, as the code of version 1 wrote it -----------------------------------------------

def v1_rows() -> dict[str, list[dict]]:
    """Every row of the version-1 fixture, by table."""
    engine = create_engine(f"sqlite:///{V1_FIXTURE}")
    try:
        meta = MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            return {name: [dict(r._mapping) for r in conn.execute(select(meta.tables[name]).order_by(
                *meta.tables[name].primary_key.columns))] for name in V1_TABLES}
    finally:
        engine.dispose()


def v1_database(db_url: str, tmp_path: Path) -> str:
    """The version-1 fixture at db_url: the file itself for SQLite; on PostgreSQL, version 1's
    tables (its frozen models) holding the fixture's rows."""
    if db_url.startswith("sqlite"):
        path = tmp_path / "v1.sqlite"
        shutil.copy(V1_FIXTURE, path)
        return f"sqlite:///{path}"
    from sqlalchemy.engine import make_url

    engine = create_engine(make_url(db_url).set(drivername="postgresql+psycopg"))
    rows = v1_rows()
    with engine.begin() as conn:
        models_v1.Base.metadata.create_all(conn)
        for name in V1_TABLES:
            if rows[name]:
                conn.execute(models_v1.Base.metadata.tables[name].insert(), rows[name])
        for name in V1_TABLES[1:]:  # rows came with their ids: move each table's sequence past them
            conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), (SELECT max(id) FROM {name}))"))
    engine.dispose()
    return db_url


def test_the_fixture_is_a_version_1_database():
    rows = v1_rows()
    assert [r["version"] for r in rows["schema_version"]] == [1]
    assert {len(rows[t]) for t in ("entries", "runs", "evals")} == {6, 32, 863}
    assert "tokens_to_converge" in rows["runs"][0] and "units_to_converge" not in rows["runs"][0]


def test_a_version_1_database_keeps_every_row_and_becomes_unit_neutral(db_url, tmp_path):
    before = v1_rows()
    url = v1_database(db_url, tmp_path)
    with open_store(url) as store:
        assert version_of(store) == latest_version()
        with store.engine.connect() as conn:
            assert columns(conn) == {t.name: {c.name for c in t.columns} for t in Base.metadata.sorted_tables}
            after = {name: [dict(r._mapping) for r in conn.execute(text(f"SELECT * FROM {name} ORDER BY 1"))]
                     for name in V1_TABLES[1:]}
        entries = {e.id: e for e in read(store, lambda s: s.scalars(select(Entry)).all(), "r")}
        runs = {r.id: r for r in read(store, lambda s: s.scalars(select(Run)).all(), "r")}
    # no row lost, and every column version 1 had (but the two folded into one) kept its value
    for name in V1_TABLES[1:]:
        assert [r["id"] for r in after[name]] == [r["id"] for r in before[name]], name
    for old in before["runs"]:
        run = runs[old["id"]]
        assert run.sha256 == old["sha256"] and run.minutes == old["minutes"] and run.header == old["header"]
        assert run.units_to_converge == (old["converged_at"] if old["converged_at"] is not None
                                         else old["tokens_to_converge"])
        if old["tokens_to_converge"] is not None:
            assert run.progress_unit == "tokens" and run.units_to_converge == old["tokens_to_converge"]
        assert run.samples_to_converge == old["samples_to_converge"]
    by_benchmark = {}
    for run in runs.values():
        by_benchmark.setdefault(entries[run.entry_id].benchmark, []).append(run)
    # the official gpt3 runs: 2,048 tokens a sequence; log perplexity, lower is better
    gpt3 = by_benchmark["gpt3"]
    assert {r.units_per_sample for r in gpt3} == {2048.0}
    assert {(m["name"], m["direction"]) for r in gpt3 for m in r.metrics} == {("log perplexity", "lower")}
    # the real trainclock gpt3-tiny run keeps its own target (its header's trainclock_target)
    (tiny,) = by_benchmark["gpt3-tiny"]
    assert tiny.units_to_converge == 524_288 and tiny.progress_unit == "tokens"
    assert tiny.metrics == [{"name": "log perplexity", "direction": "lower", "label": "validation log perplexity",
                             "target": tiny.header["trainclock_target"]}]
    assert tiny.units_per_sample == 128.0 and tiny.samples_to_converge == 4096
    # the other benchmarks: their metrics and directions from review/rules/benchmarks.yaml
    assert [m["name"] for m in by_benchmark["maskrcnn"][0].metrics] == ["BBOX", "SEGM"]
    assert [(m["name"], m["direction"]) for m in by_benchmark["stable_diffusion"][0].metrics] == [
        ("FID", "lower"), ("CLIP", "higher")]
    assert {r.progress_unit for r in by_benchmark["stable_diffusion"]} == {"steps"}
    assert {(m["name"], m["direction"]) for r in by_benchmark["rnnt"] for m in r.metrics} == {("WER", "lower")}
    # entries take their runs' unit and metrics
    for entry in entries.values():
        mine = [r for r in runs.values() if r.entry_id == entry.id]
        assert entry.progress_unit == mine[0].progress_unit and entry.metrics == mine[0].metrics


def test_a_migrated_database_takes_new_imports_like_a_new_one(tmp_path, shared_results):
    """Re-importing the fixture's gpt3 tree into the migrated store adds nothing and changes no
    stored fact: the migration computed what an import of version 2 computes."""
    from trainclock.results.importer import UNCHANGED, import_paths

    url = v1_database("sqlite", tmp_path)
    report = import_paths([shared_results / "v3.0"], url)
    assert report.runs_added == 0 and {o.status for o in report.outcomes} <= {UNCHANGED, "updated"}
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    import_paths([shared_results / "v3.0"], fresh)
    assert set(run_facts(fresh)) <= set(run_facts(url))


def run_facts(url: str) -> list[tuple]:
    with open_store(url) as store:
        return read(store, lambda s: [(r.sha256, r.progress_unit, r.units_to_converge, r.units_per_sample,
                                       r.samples_to_converge, str(r.metrics)) for r in s.scalars(select(Run))], "r")


def test_version_3_reads_eval_spans_from_logs_still_where_they_were_imported_from(tmp_path, shared_results):
    """Each run's evaluations are timed again from its log, where the file at its imported path
    still has the imported content; a moved or changed log leaves the run without them."""
    log = next((shared_results / "v3.0").rglob("result_0.txt"))
    kept, changed = tmp_path / "kept.txt", tmp_path / "changed.txt"
    shutil.copy(log, kept)
    shutil.copy(log.with_name("result_1.txt"), changed)
    url = v1_database("sqlite", tmp_path)
    engine = create_engine(url)
    with engine.begin() as conn:
        ids = [r.id for r in conn.execute(text("SELECT id FROM runs ORDER BY id LIMIT 2"))]
        for run_id, path in zip(ids, (kept, changed)):
            conn.execute(text("UPDATE runs SET path = :p, size_bytes = :n, sha256 = :h WHERE id = :i"),
                         {"p": str(path), "n": path.stat().st_size, "h": file_sha256(path), "i": run_id})
    engine.dispose()
    changed.write_bytes(changed.read_bytes().replace(b"eval_stop", b"eval_stap"))
    with open_store(url) as store:
        spans = dict(read(store, lambda s: [(r.id, r.eval_spans) for r in s.scalars(select(Run))], "r"))
    expected = review_log(log, "3.0").eval_spans
    assert expected and len(expected) > 1 and all(0 < a < b for _, a, b in expected)
    assert [n for n, _, _ in expected] == sorted(n for n, _, _ in expected) and expected[0][0] > 0  # samples
    assert spans[ids[0]] == [list(span) for span in expected]
    assert spans[ids[1]] is None  # changed since its import
    for row in v1_rows()["runs"]:  # the fixture's own paths: its gpt3 logs may be on this machine too
        path = Path(row["path"])
        if row["id"] not in ids:
            here = path.is_file() and file_sha256(path) == row["sha256"]
            assert spans[row["id"]] == ([list(span) for span in review_log(path, "3.0").eval_spans] if here else None)
