"""Importing reviewed results: the store keeps exactly what the review found, once."""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import func, select

from trainclock.results import importer
from trainclock.results.db import open_store, read
from trainclock.results.importer import NEW, UNCHANGED, UPDATED, import_entries, import_paths, import_run
from trainclock.results.models import Entry, Eval, Finding, Run, System
from trainclock.results.records import availability

from review.trainclock_logs import WORKLOAD, write_log, write_tree

TABLES = (System, Entry, Run, Eval, Finding)


def row_counts(url: str) -> dict[str, int]:
    with open_store(url) as store:
        return read(store, lambda s: {t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in TABLES},
                    "counting")


def stored_entries(url: str) -> dict[tuple, Entry]:
    with open_store(url) as store:
        entries = read(store, lambda s: s.scalars(select(Entry)).all(), "reading")
        runs = read(store, lambda s: s.scalars(select(Run).order_by(Run.run_index)).all(), "reading")
    for entry in entries:
        entry.stored_runs = [r for r in runs if r.entry_id == entry.id]
    return {(e.round, e.org, e.system, e.benchmark): e for e in entries}


def test_the_store_keeps_the_review_exactly(db_url, shared_reviews):
    with open_store(db_url) as store:
        report = import_entries(store, shared_reviews)
    assert [o.status for o in report.outcomes] == [NEW] * len(shared_reviews)
    stored = stored_entries(db_url)
    assert len(stored) == len(shared_reviews) == 8
    for review in shared_reviews:
        entry = stored[(review.context.round, review.org, review.system, review.benchmark)]
        assert entry.score_minutes == review.score_minutes  # the very same float, not approximately
        assert entry.verdict == review.verdict and entry.reasons == list(review.reasons)
        assert entry.mlperf_benchmark == review.benchmark and entry.division == review.division
        assert entry.rcp_status == review.rcp.status
        assert [r.minutes for r in entry.stored_runs] == [r.minutes for r in review.runs]
        assert [r.passed for r in entry.stored_runs] == [r.passed for r in review.runs]
        assert [r.units_to_converge for r in entry.stored_runs] == [r.units_to_converge for r in review.runs]
        assert [r.progress_unit for r in entry.stored_runs] == [r.progress_unit for r in review.runs]
        assert [r.metrics for r in entry.stored_runs] == [[m.as_json() for m in r.metrics] for r in review.runs]
        assert [r.samples_to_converge for r in entry.stored_runs] == [r.samples_to_converge for r in review.runs]
        assert [r.errors for r in entry.stored_runs] == [len(r.errors) for r in review.runs]
    coreweave = stored[("3.0", "NVIDIA+CoreWeave", "coreweave_hgxh100_n448_ngc23.04_pytorch", "gpt3")]
    assert coreweave.score_minutes == pytest.approx(10.940417, abs=1e-6)
    assert [r.units_to_converge for r in coreweave.stored_runs] == [1_211_105_280.0] * 3  # the published figures
    bert = stored[("3.1", "NVIDIA", "eos_n8_ngc23.04_pytorch", "bert")]
    assert [r.status for r in bert.stored_runs].count("aborted") == 1
    assert bert.score_minutes == pytest.approx(0.898131, abs=1e-6)
    assert row_counts(db_url) == {"systems": 5, "entries": 8, "runs": 23, "evals": 431, "findings": 2}


def test_evaluations_findings_and_systems_are_kept(db_url, shared_reviews, shared_results):
    with open_store(db_url) as store:
        import_entries(store, shared_reviews)
        bert = [r for r in shared_reviews if r.benchmark == "bert" and len(r.runs) == 10][0]
        failed = bert.runs[4]
        run = read(store, lambda s: s.scalars(select(Run).where(Run.file_name == "result_4.txt",
                                                                Run.path.contains("eos_n8"))).one(), "reading")
        evals = read(store, lambda s: s.scalars(select(Eval).where(Eval.run_id == run.id).order_by(Eval.seq)).all(), "r")
        findings = read(store, lambda s: s.scalars(select(Finding).where(Finding.run_id == run.id)).all(), "r")
        systems = read(store, lambda s: {x.name + "@" + (x.fields.get("submitter") or ""): x
                                         for x in s.scalars(select(System))}, "r")
    assert [(p.progress, p.value, p.lineno) for p in evals] == [(p.progress, p.value, p.lineno) for p in failed.evals]
    assert sorted((f.rule, f.key, f.lineno) for f in findings) == sorted((f.rule, f.key, f.lineno) for f in failed.errors)
    assert run.header["submission_benchmark"] == "bert" and run.status == "aborted" and not run.passed
    coreweave = systems["coreweave_hgxh100_n448_ngc23.04_pytorch@NVIDIA+CoreWeave"]
    written = (shared_results / "v3.0/NVIDIA_CoreWeave/systems/coreweave_hgxh100_n448_ngc23.04_pytorch.json").read_text()
    assert coreweave.fields == json.loads(written)  # every field, nested ones included
    assert coreweave.accelerators == 3584 and coreweave.accelerator_model == "NVIDIA H100-SXM5-80GB"
    assert coreweave.status == "cloud"


def test_availability_from_the_system_else_from_the_logs(db_url, shared_reviews):
    with open_store(db_url) as store:
        import_entries(store, shared_reviews)
    stored = stored_entries(db_url)
    # the system says cloud although its logs say onprem: the system description decides
    assert stored[("3.0", "NVIDIA+CoreWeave", "coreweave_hgxh100_n448_ngc23.04_pytorch", "gpt3")].availability == "cloud"
    # "available" says neither, so the logs' submission_status does
    assert stored[("3.0", "Intel-HabanaLabs", "HLS-Gaudi2-N48-PT", "gpt3")].availability == "onprem"
    assert stored[("3.1", "Intel-HabanaLabs", "HLS-Gaudi2-N48-PT", "gpt3")].status == "Available on premise"
    assert stored[("3.1", "Google", "cloud-tpu-v5e-4096-PAX", "gpt3")].availability == "cloud"  # no system file


@pytest.mark.parametrize("status, expected", [
    ("cloud", "cloud"), ("Available cloud", "cloud"), ("onprem", "onprem"), ("Available on premise", "onprem"),
    ("on-premise", "onprem"), ("available", None), ("preview", None), ("", None), (None, None), (3, None)])
def test_availability_words(status, expected):
    assert availability(status) == expected


def test_importing_twice_adds_nothing(db_url, shared_results):
    first = import_paths([shared_results], db_url)
    counts = row_counts(db_url)
    second = import_paths([shared_results], db_url)
    assert row_counts(db_url) == counts
    assert first.runs_added == 23 and second.runs_added == 0 and second.runs_present == 23
    assert [o.status for o in second.outcomes] == [UNCHANGED] * 8
    assert first.entry_ids == second.entry_ids


def test_a_trainclock_run_is_its_workloads_entry(db_url, tmp_path):
    """`trainclock run` calls import_run at the end of each run: the first makes an incomplete entry
    under the workload's name; the third run completes and scores it."""
    out = write_tree(tmp_path / "out", minutes=[1.5])
    log = out / "results" / "cpu-box" / WORKLOAD / "result_0.txt"
    report = import_run(log, db_url)
    (entry,) = stored_entries(db_url).values()
    assert report.outcomes[0].status == NEW and report.runs_added == 1
    assert (entry.benchmark, entry.mlperf_benchmark) == (WORKLOAD, "gpt3")
    assert entry.verdict == "incomplete" and entry.org == "trainclock"
    assert entry.score_minutes is None and len(entry.stored_runs) == 1 and entry.availability == "onprem"
    for i, minutes in ((1, 1.2), (2, 1.7)):
        write_log(log.with_name(f"result_{i}.txt"), minutes)
        report = import_run(log.with_name(f"result_{i}.txt"), db_url)
        assert (report.runs_added, report.runs_present) == (1, i)
    (entry,) = stored_entries(db_url).values()
    assert entry.verdict == "valid" and entry.score_minutes == pytest.approx(1.5) and len(entry.stored_runs) == 3
    assert import_run(log, db_url).outcomes[0].status == UNCHANGED


def test_a_workload_is_never_mixed_with_the_official_benchmark(db_url, tmp_path, shared_results):
    import_paths([write_tree(tmp_path / "out", minutes=[1.5]), shared_results / "v3.0"], db_url)
    benchmarks = sorted((e.benchmark, e.mlperf_benchmark) for e in stored_entries(db_url).values())
    assert benchmarks == [("gpt3", "gpt3"), ("gpt3", "gpt3"), (WORKLOAD, "gpt3")]


def test_reviewing_part_of_an_entry_keeps_its_score(db_url, shared_results):
    gaudi = shared_results / "v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3"
    import_paths([gaudi], db_url)
    report = import_paths([gaudi / "result_1.txt"], db_url)  # alone, it would be an incomplete entry
    (entry,) = stored_entries(db_url).values()
    assert entry.verdict == "valid" and entry.score_minutes == pytest.approx(153.581333, abs=1e-6)
    assert report.outcomes[0].status == UNCHANGED and "kept its stored score" in report.outcomes[0].notes[0]


def test_one_log_then_its_folder_rescores_the_entry(db_url, shared_results):
    gaudi = shared_results / "v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3"
    import_paths([gaudi / "result_1.txt"], db_url)
    report = import_paths([gaudi], db_url)
    (entry,) = stored_entries(db_url).values()
    assert report.outcomes[0].status == UPDATED and (report.runs_added, report.runs_present) == (2, 1)
    assert entry.verdict == "valid" and len(entry.stored_runs) == 3


def test_a_copied_log_is_stored_once(db_url, tmp_path, shared_results):
    gaudi = "v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3"
    copy = tmp_path / "v3.1/Intel-HabanaLabs/results/other-name/gpt3"
    copy.mkdir(parents=True)
    shutil.copy(shared_results / gaudi / "result_0.txt", copy / "result_0.txt")
    shutil.copy(shared_results / gaudi / "result_0.txt", copy / "result_1.txt")  # twice in one folder, too
    import_paths([shared_results / gaudi], db_url)
    report = import_paths([copy], db_url)
    assert report.runs_added == 0 and row_counts(db_url)["runs"] == 3
    notes = " ".join(report.outcomes[0].notes)
    assert "is a copy of result_0.txt" in notes and "the same log is stored under entry" in notes


def test_a_failure_mid_import_keeps_the_entries_before_it(db_url, shared_reviews, monkeypatch):
    original = importer._insert_runs
    calls = []

    def fail_on_the_third_entry(session, entry_id, runs, now):
        calls.append(entry_id)
        original(session, entry_id, runs, now)  # written, then the transaction fails
        if len(calls) == 3:
            raise RuntimeError("simulated crash")

    monkeypatch.setattr(importer, "_insert_runs", fail_on_the_third_entry)
    with open_store(db_url) as store, pytest.raises(RuntimeError, match="simulated crash"):
        import_entries(store, shared_reviews)
    counts = row_counts(db_url)
    first_two = shared_reviews[:2]
    assert counts["entries"] == 2 and counts["runs"] == sum(len(e.runs) for e in first_two)
    assert counts["evals"] == sum(len(r.evals) for e in first_two for r in e.runs)
    monkeypatch.undo()
    with open_store(db_url) as store:
        report = import_entries(store, shared_reviews)
    assert report.count(NEW) == 6 and report.count(UNCHANGED) == 2 and row_counts(db_url)["runs"] == 23


def test_a_log_outside_a_result_tree_is_imported_alone(db_url, tmp_path, shared_results):
    lone = tmp_path / "downloads" / "result_0.txt"
    lone.parent.mkdir()
    shutil.copy(shared_results / "v3.1/Google/results/cloud-tpu-v5e-4096-PAX/gpt3/result_0.txt", lone)
    shutil.copy(shared_results / "v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3/result_0.txt",
                lone.with_name("result_1.txt"))  # another system's log beside it stays out
    report = import_run(lone, db_url)
    (entry,) = stored_entries(db_url).values()
    assert report.runs_added == 1 and len(entry.stored_runs) == 1
    # org and system from the log itself; the round is the latest, as no v3.x folder says otherwise
    assert (entry.org, entry.benchmark, entry.round, entry.round_source) == ("Google", "gpt3", "3.1", "default")
