"""Fixtures of the report tests: a store with the real MLPerf logs of shared/ plus a trainclock
run tree (with its metrics file), a copy of it with a system named like a script, and a planner
curve in the format `trainclock plan --sweep --save` writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from review.conftest import shared_entries, shared_results  # noqa: F401  (skip when shared/ is missing)
from review.trainclock_logs import write_tree
from trainclock.results.importer import import_paths

INJECTED = "<script>window.pwned = 1; document.title = 'pwned';</script>"
INJECTED_ENTRY = "coreweave"  # the entry whose system gets that name in the injected store
OWN_STEPS = 40
PRICE = "2.10/gpu-hour"


@pytest.fixture(scope="session")
def own_runs(tmp_path_factory) -> Path:
    """A trainclock output folder: three gpt3-tiny logs, and a metrics file beside the first."""
    root = write_tree(tmp_path_factory.mktemp("own-runs"), [2.0, 2.5, 3.0])
    log = next(root.glob("results/*/*/result_0.txt"))
    rows = []
    for step in range(OWN_STEPS):
        tokens = (step + 1) * 32 * 128
        rows.append({"step": step, "samples": (step + 1) * 32, "tokens": tokens, "time_s": 3.0 * (step + 1),
                     "loss": 7.0 - 2.2 * step / OWN_STEPS, "lr": 1e-3, "grad_norm": 1.0, "tokens_per_s": 1365.3})
        if step % 10 == 9:
            rows.append({"step": step, "samples": (step + 1) * 32, "tokens": tokens, "time_s": 3.0 * (step + 1) + 1,
                         "eval": 6.5 - 1.6 * step / OWN_STEPS})
    log.with_name("result_0.metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="session")
def store_file(tmp_path_factory, shared_results, own_runs) -> Path:  # noqa: F811
    path = tmp_path_factory.mktemp("store") / "results.db"
    import_paths([shared_results, own_runs], f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def db_url(store_file) -> str:
    return f"sqlite:///{store_file}"


@pytest.fixture(scope="session")
def injected_db_url(tmp_path_factory, store_file) -> str:
    """The same store with one system renamed to a script, as a hostile log or system file could name it."""
    path = tmp_path_factory.mktemp("injected") / "results.db"
    shutil.copy(store_file, path)
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        changed = conn.execute(text("UPDATE entries SET system = :name WHERE lower(system) LIKE :like"),
                               {"name": INJECTED, "like": f"%{INJECTED_ENTRY}%"}).rowcount
    engine.dispose()
    assert changed == 1
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def planner_curve_file(tmp_path_factory) -> Path:
    """A curve predicted by the planner itself, saved the way `trainclock plan --sweep --save` does."""
    from trainclock.planner.output import scaling_curve as sweep
    from trainclock.planner.model.run_cost import parse_price
    from trainclock.planner.model.hardware import load_catalogue
    from trainclock.planner.plan import Planner
    from trainclock.planner.model.workload_view import cost_model

    catalogue = load_catalogue([])
    accelerator = catalogue["h100-sxm"]
    planner = Planner(cost_model("gpt3-175b"), catalogue)
    calibrated = planner.calibrated(accelerator)
    predictions = [planner.plan(accelerator, n, calibrated, {})[0] for n in (512, 3584, 10752)]
    path = tmp_path_factory.mktemp("plan") / "h100.json"
    sweep.save_curve(sweep.curve(predictions, parse_price(PRICE, accelerator)), path,
                     {"member": "gpt3-175b", "benchmark": "gpt3", "accelerator": "h100-sxm",
                      "calibration": calibrated.source, "price": PRICE})
    return path
