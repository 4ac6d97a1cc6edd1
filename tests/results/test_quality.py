"""Benchmarks other than GPT-3 in the store: each one's progress unit and quality metrics (from
review/rules/benchmarks.yaml, checked here against the real v3.1 logs of all nine benchmarks),
and the best quality per entry taken in each metric's direction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainclock.results.db import open_store, read
from trainclock.results.importer import import_paths
from trainclock.results.queries import EntryFilter, best_quality, list_entries
from trainclock.review.benchmarks import HIGHER, benchmark_facts, known_benchmarks
from trainclock.review.run_review import review_log
from trainclock.review.scoring import scoring_rule
from trainclock.review.tree import review_path

SUITE = Path(__file__).resolve().parents[2] / ".." / "shared" / "mlperf-suite"
DELL = "v3.1/Dell/results/XE9680x8H100-SXM-80GB"
# the metadata field each benchmark's v3.1 eval_accuracy lines count progress in, and what it counts
PROGRESS_FIELD = {"epochs": "epoch_num", "samples": "epoch_num", "steps": "step_num", "tokens": "epoch_num"}


@pytest.fixture(scope="module")
def suite() -> Path:
    if not SUITE.is_dir():
        pytest.skip(f"the MLPerf suite fixtures are not at {SUITE.resolve()}")
    return SUITE.resolve()


PUBLISHED_ROUNDS = ("3.0", "3.1", "4.0", "4.1", "5.0", "5.1")  # the later ones have no logs to take facts from yet


def test_every_benchmark_with_a_scoring_rule_has_facts_that_agree_with_it():
    from trainclock.review.rounds import all_rounds

    published = {(round_, key) for round_ in PUBLISHED_ROUNDS for key in all_rounds()[round_].benchmarks}
    assert {key for _, key in published} == set(known_benchmarks())
    for round_, key in published:
        facts = benchmark_facts(key)
        # a round's rules count progress in the unit of the facts, or of the field its logs count in
        assert scoring_rule(key, round_).progress in {facts.progress, *dict(facts.counted_by).values()}, key
        assert facts.metrics, key


@pytest.mark.parametrize("benchmark", ["bert", "resnet", "ssd", "maskrcnn", "unet3d", "dlrm_dcnv2", "rnnt",
                                       "stable_diffusion"])
def test_the_facts_match_the_official_logs(suite, benchmark):
    """Metric names are those the logs use, directions make the run that succeeded end better
    than it started, and the progress count is where the facts say."""
    facts = benchmark_facts(benchmark)
    run = review_log(suite / DELL / benchmark / "result_0.txt", "3.1")
    assert run.status == "success" and run.progress_unit == facts.progress and run.metrics == facts.metrics
    lines = [json.loads(line.split(":::MLLOG", 1)[1]) for line in run.path.read_text().splitlines()
             if '"eval_accuracy"' in line]
    assert all(PROGRESS_FIELD[facts.progress] in line["metadata"] for line in lines)
    for metric in facts.metrics:
        if isinstance(lines[0]["value"], dict):  # maskrcnn: {"BBOX": .., "SEGM": ..}
            values = [line["value"][metric.name] for line in lines]
        elif len(facts.metrics) > 1:  # stable diffusion: one line per metric, named in metadata
            values = [line["value"] for line in sorted(lines, key=lambda l: l["metadata"]["step_num"])
                      if line["metadata"]["metric"] == metric.name]
        else:
            values = [line["value"] for line in lines]
        assert values, metric
        first, last = values[0], values[-1]
        assert (last > first) if metric.direction == HIGHER else (last < first), (benchmark, metric.name, first, last)


def test_progress_in_samples_where_the_log_says_how_many(suite):
    bert = review_log(suite / DELL / "bert" / "result_0.txt", "3.1")
    assert bert.samples_to_converge == bert.units_to_converge
    sd = review_log(suite / DELL / "stable_diffusion" / "result_0.txt", "3.1")
    assert sd.samples_to_converge == sd.units_to_converge * sd.header["global_batch_size"]  # steps x batch
    resnet = review_log(suite / DELL / "resnet" / "result_0.txt", "3.1")
    assert resnet.progress_unit == "epochs" and resnet.samples_to_converge is None  # not said exactly


@pytest.fixture(scope="module")
def dell_store(suite, tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('quality') / 'results.db'}"
    folders = [suite / DELL / name for name in ("rnnt", "maskrcnn", "stable_diffusion")]
    import_paths(folders, url, "3.1")
    return url


def test_best_quality_follows_each_metrics_direction(dell_store, suite):
    with open_store(dell_store) as store:
        rows = read(store, lambda s: list_entries(s), "r")
        best = read(store, lambda s: best_quality(s, [r.id for r in rows]), "r")
    by_name = {r.benchmark: r for r in rows}
    for name, row in by_name.items():
        (entry,) = review_path(suite / DELL / name, "3.1")
        assert row.progress_unit == benchmark_facts(name).progress
        assert [m.name for m in row.quality] == [m.name for m in benchmark_facts(name).metrics]
        for metric in benchmark_facts(name).metrics:
            values = []
            for run in entry.runs:
                if not run.passed:
                    continue
                for p in run.evals:
                    if isinstance(p.value, dict):
                        values.append(p.value[metric.name])
                    elif p.metric in (None, metric.name):
                        values.append(p.value)
            expected = max(values) if metric.direction == HIGHER else min(values)
            assert best[row.id][metric.name] == pytest.approx(expected, rel=1e-12), (name, metric.name)
    assert best[by_name["rnnt"].id]["WER"] < 0.058  # lower is better: the minimum, below the target


def test_compare_titles_and_best_columns_say_the_direction(cli, dell_store):
    code, out, _ = cli("results", "compare", "--db", dell_store)
    assert code == 0
    flat = " ".join(out.split())
    assert "quality: word error rate (lower is better)" in flat
    assert "quality: box mAP (higher is better) and mask mAP (higher is better)" in flat
    assert "quality: FID (lower is better) and CLIP score (higher is better)" in flat
    with open_store(dell_store) as store:
        (rnnt,) = read(store, lambda s: list_entries(s, EntryFilter(benchmark="rnnt")), "r")
    code, out, _ = cli("results", "show", "--db", dell_store, str(rnnt.id))
    assert code == 0 and "quality: word error rate (lower is better)" in " ".join(out.split())
    assert "epochs to target" in " ".join(out.split())


def test_a_trainclock_log_of_the_new_form_stores_its_own_unit_and_metrics(tmp_path):
    """trainclock_progress_unit and one trainclock_target per metric, with direction, win over any facts."""
    from report.test_curves import write_new_form_run

    write_new_form_run(tmp_path / "results" / "box" / "detect-tiny")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    import_paths([tmp_path], url)
    with open_store(url) as store:
        (row,) = read(store, lambda s: list_entries(s), "r")
        best = read(store, lambda s: best_quality(s, [row.id]), "r")
    assert row.progress_unit == "images"
    assert row.metrics == [{"name": "BBOX", "direction": "higher", "target": 0.3},
                           {"name": "error", "direction": "lower", "target": 0.1}]
    assert row.passed_runs == 0 and best[row.id] == {}  # no MLPerf rules for it: only runs that pass review count


def test_migrations_do_not_import_the_database_module():
    """db.py opens the store and migrates it; migrations.py must not need db.py back (no import circle)."""
    import subprocess
    import sys

    code = ("import sys, trainclock.results.migrations; "
            "assert 'trainclock.results.db' not in sys.modules, 'migrations imports db'")
    subprocess.run([sys.executable, "-c", code], check=True)
