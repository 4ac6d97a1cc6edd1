"""Inputs that once crashed, hung or polluted `results import` (issue 11): a FIFO named like a
log, lone surrogates, absurd node counts, renamed copies of stored logs, files with no MLLOG line."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from sqlalchemy import insert

from trainclock.errors import DataError
from trainclock.results.db import open_store, read, write
from trainclock.results.importer import import_paths
from trainclock.results.models import Entry
from trainclock.results.queries import list_entries, load_entry
from trainclock.results.render import print_entries, print_entry, print_import

from review.hostile import ORG, SYSTEM, copy_tree, strict_console, time_limit

from .test_import import row_counts


def test_a_fifo_named_like_a_log_is_not_waited_for(db_url, shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    os.mkfifo(folder / "result_9.txt")
    with time_limit(60):
        report = import_paths([folder], db_url)
    assert report.logs == 3 and row_counts(db_url)["runs"] == 3


def test_lone_surrogates_are_stored_and_shown(db_url, shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    log = folder / "result_0.txt"
    log.write_text(log.read_text().replace('"value": "Intel-HabanaLabs"', '"value": "Intel\\ud800"', 1))
    system_json = tmp_path / ORG / "systems" / f"{SYSTEM}.json"
    system_json.write_text(system_json.read_text().replace('"submitter": "', '"submitter": "\\udfff', 1))
    report = import_paths([folder], db_url)
    console, raw = strict_console()
    print_import(report, console)
    with open_store(db_url) as store:
        print_entry(read(store, lambda s: load_entry(s, str(report.entry_ids[0])), "reading"), console, verbose=True)
    assert "\ufffd" in raw.getvalue().decode()


def test_a_huge_node_count_is_refused_with_a_reason(db_url, shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    system_json = tmp_path / ORG / "systems" / f"{SYSTEM}.json"
    desc = json.loads(system_json.read_text())
    desc["number_of_nodes"] = "99999999999999999999999"
    system_json.write_text(json.dumps(desc))
    report = import_paths([folder], db_url)
    with open_store(db_url) as store:
        (row,) = read(store, list_entries, "listing")
        entry = read(store, lambda s: load_entry(s, str(row.id)), "reading")
    assert row.accelerators is None and entry.system_row.number_of_nodes is None
    assert any("number_of_nodes is" in reason for reason in entry.reasons)
    assert report.outcomes[0].status == "new"


def test_renamed_copies_of_stored_logs_make_no_phantom_entry(db_url, shared_results, tmp_path):
    import_paths([copy_tree(shared_results, tmp_path / "a")], db_url)
    for i in range(3):
        report = import_paths([copy_tree(shared_results, tmp_path / f"b{i}", system=f"renamed-{i}")], db_url)
        assert report.runs_added == 0 and report.count("new") == 0
        assert any("not added as a second entry" in note for note in report.outcomes[0].notes)
    assert row_counts(db_url)["entries"] == 1
    with open_store(db_url) as store:
        rows = read(store, list_entries, "listing")
    assert [(r.runs, r.verdict) for r in rows] == [(3, "valid")]


def test_an_entry_without_runs_is_never_listed_as_valid_or_scored(db_url, shared_results, tmp_path):
    import_paths([copy_tree(shared_results, tmp_path)], db_url)
    with open_store(db_url) as store:
        (stored,) = read(store, list_entries, "listing")
        entry = read(store, lambda s: load_entry(s, str(stored.id)), "reading")
        phantom = {c.name: getattr(entry, c.name) for c in Entry.__table__.columns if c.name != "id"}
        write(store, lambda s: s.execute(insert(Entry), [{**phantom, "system": "phantom"}]), "adding a phantom")
        rows = read(store, list_entries, "listing")
        shown = read(store, lambda s: load_entry(s, "phantom"), "reading")
    (row,) = [r for r in rows if r.system == "phantom"]
    assert row.runs == 0 and row.verdict == "incomplete" and row.score_minutes is None
    console, raw = strict_console()
    print_entries(rows, console)
    print_entry(shown, console)
    assert "valid" not in raw.getvalue().decode().split("phantom", 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 40, b"no marker here\n" * 10])
def test_a_file_without_mllog_lines_is_not_imported(db_url, tmp_path, content, cli):
    log = tmp_path / "result_0.txt"
    log.write_bytes(content)
    with pytest.raises(DataError, match="no :::MLLOG events"):
        import_paths([log], db_url)
    code, out, err = cli("results", "import", "--db", db_url, log)
    assert code != 0 and "nothing imported" in err and len(err.strip().splitlines()) == 1
    assert row_counts(db_url)["entries"] == 0


def test_a_junk_file_beside_real_logs_is_skipped_with_its_reason(db_url, shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    (folder / "result_3.txt").write_bytes(b"\x00\xff" * 100)
    report = import_paths([folder], db_url)
    assert report.logs == 3 and any("result_3.txt" in s for s in report.skipped)
    assert row_counts(db_url)["runs"] == 3
