"""Fixtures of the results-store tests: a database of each kind (SQLite always, PostgreSQL when
TRAINCLOCK_TEST_POSTGRES_URL names a server; scripts/start_postgres.sh starts one), the real
MLPerf logs in shared/, trainclock-written result trees, and the CLI."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from trainclock import cli as trainclock_cli
from trainclock.commands import results as results_command

# tests/ is on sys.path (pytest's rootdir-relative imports), so the review tests' fixtures of the
# MLPerf logs in shared/ (shared_results, shared_entries) and their log writer are shared from there
from review.conftest import shared_entries, shared_results  # noqa: F401
from review.trainclock_logs import write_tree

POSTGRES_ENV = "TRAINCLOCK_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A fresh, empty database: a SQLite file, or a schema of its own on the test PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set; `export {POSTGRES_ENV}=$(scripts/start_postgres.sh)` starts a server")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    # every connection of the test, in any process, works in that schema alone
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture(scope="session")
def shared_reviews(shared_entries):
    """The review of all of shared/mlperf-results, done once, in review_path's order."""
    return list(shared_entries.values())


@pytest.fixture
def cli(cli, monkeypatch):
    """tests/conftest.py's, with the results command registered even where the CLI lacks it."""
    if results_command not in trainclock_cli.COMMANDS:
        monkeypatch.setattr(trainclock_cli, "COMMANDS", [*trainclock_cli.COMMANDS, results_command])
    return cli


def gpu_family_tree(root: Path, system: str, accelerators: int, minutes: list[float]) -> Path:
    """A trainclock result tree whose system description claims `accelerators` accelerators of a
    made-up GPU, for scaling arithmetic with known times."""
    write_tree(root, minutes)
    (root / "results" / "cpu-box").rename(root / "results" / system)
    description = json.loads((root / "systems" / "cpu-box.json").read_text())
    description.update(system_name=system, number_of_nodes="1", accelerators_per_node=str(accelerators),
                       accelerator_model_name="Test GPU")
    (root / "systems" / "cpu-box.json").unlink()
    (root / "systems" / f"{system}.json").write_text(json.dumps(description))
    return root
