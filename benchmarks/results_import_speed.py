"""How fast `trainclock results import` stores reviewed MLPerf logs: logs/s and MB/s into SQLite and,
given a server, PostgreSQL, on shared/mlperf-results and on a larger tree of copies of it.

  python benchmarks/results_import_speed.py [--shared PATH] [--copies 10] [--postgres URL]

The review is timed apart (benchmarks/review_speed.py measures it); the figures here are for the
store alone, each into an empty database:
  first    import_entries of every entry of shared/ (rows written)
  again    the same import again (nothing new: the idempotent path)
  large    import_entries of the replicated tree
  cold     a fresh Python process running `import_paths` on shared/, review and imports included
--postgres (default: $TRAINCLOCK_TEST_POSTGRES_URL) runs the same into a throwaway schema.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from review_speed import SHARED, logs_and_bytes, replicate, report
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from trainclock.results.db import open_store
from trainclock.results.importer import import_entries
from trainclock.review.tree import review_path


@contextmanager
def empty_database(kind: str, tmp: Path, postgres: str | None) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp / f'{uuid.uuid4().hex}.db'}"
        return
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(make_url(postgres).set(drivername="postgresql+psycopg"))
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield make_url(postgres).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(False)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def store_seconds(url: str, entries, times: int = 1) -> list[float]:
    with open_store(url) as store:
        return [import_entries(store, entries).store_seconds for _ in range(times)]


def cold_seconds(url: str, shared: Path) -> float:
    code = (f"from pathlib import Path; from trainclock.results.importer import import_paths; "
            f"import_paths([Path({str(shared)!r})], {url!r})")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the MLPerf result logs (default: %(default)s)")
    parser.add_argument("--copies", type=int, default=10, help="copies of shared/ in the large tree")
    parser.add_argument("--postgres", default=os.environ.get("TRAINCLOCK_TEST_POSTGRES_URL"),
                        help="a PostgreSQL URL to measure too (default: $TRAINCLOCK_TEST_POSTGRES_URL)")
    args = parser.parse_args()
    shared = args.shared.resolve()
    logs, size = logs_and_bytes(shared)
    entries = review_path(shared)
    with tempfile.TemporaryDirectory() as tmp:
        large = replicate(shared, Path(tmp) / "large", args.copies)
        large_logs, large_size = logs_and_bytes(large)
        large_entries = review_path(large)
        for kind in ["sqlite"] + (["postgresql"] if args.postgres else []):
            print(f"{kind}:")
            with empty_database(kind, Path(tmp), args.postgres) as url:
                first, again = store_seconds(url, entries, times=2)
                report("first", first, logs, size)
                report("again", again, logs, size)
            with empty_database(kind, Path(tmp), args.postgres) as url:
                (seconds,) = store_seconds(url, large_entries)
                report("large", seconds, large_logs, large_size)
                print(f"          ({len(large_entries)} entries in the large tree)")
            with empty_database(kind, Path(tmp), args.postgres) as url:
                report("cold", cold_seconds(url, shared), logs, size)


if __name__ == "__main__":
    main()
