"""Several processes importing into one database at once lose nothing and add nothing twice."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from review.trainclock_logs import write_tree

from .test_import import row_counts, stored_entries

WORKERS = 4
WORKER = Path(__file__).with_name("import_worker.py")


def test_concurrent_imports_lose_nothing(db_url, tmp_path, shared_results, shared_reviews):
    # each worker imports the same official round (the same rows, raced for) and a run of its own
    official = [entry for entry in shared_reviews if entry.context.round == "3.1"]
    own_trees = []
    for i in range(WORKERS):
        tree = write_tree(tmp_path / f"out{i}", minutes=[1.0 + i / 10])
        (tree / "results" / "cpu-box").rename(tree / "results" / f"cpu-box-{i}")
        (tree / "systems" / "cpu-box.json").rename(tree / "systems" / f"cpu-box-{i}.json")
        own_trees.append(tree)
    start = tmp_path / "start"
    ready = [tmp_path / f"ready{i}" for i in range(WORKERS)]
    workers = [subprocess.Popen([sys.executable, str(WORKER), str(ready[i]), str(start), db_url,
                                 str(shared_results / "v3.1"), str(tree)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i, tree in enumerate(own_trees)]
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in ready) and time.monotonic() < deadline and all(w.poll() is None for w in workers):
        time.sleep(0.01)
    start.touch()  # all loaded: they import at once
    outputs = [worker.communicate(timeout=120) for worker in workers]
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err
        assert f"imported {len(official) + 1} entries" in out
    runs = [run for entry in official for run in entry.runs]
    assert row_counts(db_url) == {
        "systems": len({e.context.system_path for e in official if e.context.system_path}) + WORKERS,
        "entries": len(official) + WORKERS,
        "runs": len(runs) + WORKERS,
        "evals": sum(len(run.evals) for run in runs) + 2 * WORKERS,  # a written run evaluates twice
        "findings": sum(len(run.findings) for run in runs)}
    systems = sorted(key[2] for key in stored_entries(db_url) if key[2].startswith("cpu-box"))
    assert systems == [f"cpu-box-{i}" for i in range(WORKERS)]
