"""README.md's benchmark tables are generated from the workload registry (scripts/readme_tables.py):
CI fails when a member changes (a target, a parameter count, a new member) and the README was not
regenerated."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from trainclock.workload import registry

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "readme_tables.py"


@pytest.fixture(scope="module")
def tables():
    if registry.unavailable():
        pytest.skip(f"a benchmark's dependency is not installed ({registry.unavailable()}): its table cannot be made")
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_tables_are_up_to_date(tables, capsys):
    rc = tables.main(["--check"])
    assert rc == 0, capsys.readouterr().out.strip()


def test_a_changed_row_fails_the_check_in_one_line_and_a_rewrite_restores_it(tables, tmp_path, capsys):
    original = (ROOT / "README.md").read_text()
    readme = tmp_path / "README.md"
    block = tables.MARKERS.search(original)
    body = block.group("body")
    stale = body.replace(" | ", " | 0", 1)  # a member's parameter count as an old README would have it
    readme.write_text(original.replace(body, stale, 1))

    assert tables.main(["--check"], readme=readme) == 1
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and "out of date" in out and block.group("keys") in out
    assert readme.read_text() != original  # --check changes nothing

    assert tables.main([], readme=readme) == 0
    assert readme.read_text() == original
    assert tables.main(["--check"], readme=readme) == 0


def test_a_workload_without_a_table_fails_the_check(tables, tmp_path, capsys):
    original = (ROOT / "README.md").read_text()
    block = tables.MARKERS.search(original)
    readme = tmp_path / "README.md"
    readme.write_text(original.replace(block.group(0), "", 1))
    assert tables.main(["--check"], readme=readme) == 1
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and f"no table for {block.group('keys').split()[0]}" in out


def test_every_member_has_a_row_with_its_target_and_run_command(tables):
    text = (ROOT / "README.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| ([\w.-]+) \|.*$", text, re.MULTILINE)}
    for workload in tables.built_in_workloads().values():
        for member in workload.members():
            row = rows[member.name]
            assert all(t.describe() in row for t in member.quality), row
            assert "`trainclock run " in row
