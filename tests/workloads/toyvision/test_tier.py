"""The toy image classifier, a workload that lives only in tests/, goes through everything GPT-3
does with no change outside tests/: `trainclock list`, a run to its higher-is-better target with
images as units and epochs in the log, the official checker, review, the results store, a
2-process run, resume after kill -9, and a whole entry with --runs."""

from __future__ import annotations

import pytest

from tests.official_checker import check
from tests.workloads.helpers import (TOY, TOY_MEMBER, assert_same_loss_curve, assert_tier_met_its_target, checked_log,
                                     evaluations, kill_at_first_checkpoint, log_path, records, resumed_log_events,
                                     step_records, toy, toy_run)
from trainclock.mllog.reader import read_events


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy-one")
    proc = toy(*toy_run(out, "--seed", "3", "--db", f"sqlite:///{out}/store.sqlite", "--dataset-name", "toy patterns"))
    return out, proc


def test_the_workload_flags_show_only_with_the_workload():
    own = toy("run", "toyvision-tiny", "--help")
    assert own.returncode == 0 and "--dataset-name" in own.stdout and "the benchmark's own flags" in own.stdout
    other = toy("run", "gpt3-tiny", "--dataset-name", "x")
    assert other.returncode == 2 and "unrecognized arguments: --dataset-name" in other.stderr


def test_list_shows_both_workloads_with_metric_direction_and_target():
    proc = toy("list")
    assert proc.returncode == 0, proc.stderr
    assert "toyvision-tiny" in proc.stdout and "top-1 accuracy >= 0.88" in proc.stdout
    assert "gpt3-mini" in proc.stdout and "<= 5.203" in proc.stdout


def test_trains_to_its_higher_is_better_target(one_run):
    out = assert_tier_met_its_target(one_run, TOY_MEMBER, "top-1 accuracy", 0.88,
                                     in_stdout=("images to target", "images/s"))
    trained = step_records(out, TOY_MEMBER)
    assert trained[-1]["loss"] < trained[0]["loss"] - 1.0
    assert trained[-1]["units"] == trained[-1]["samples"]  # one image per sample


def test_log_counts_epochs_and_passes_the_official_common_rules(one_run):
    out, _ = one_run
    log = checked_log(out, TOY_MEMBER)
    events = log.events
    header = {e.key: e for e in events}
    assert header["submission_benchmark"].value == "resnet" and header["opt_name"].value == "sgd"
    assert header["sgd_opt_momentum"].value == 0.9
    target = header["trainclock_target"]
    assert (target.value, target.metadata["metric"], target.metadata["direction"]) == (0.88, "top-1 accuracy", "higher")
    assert header["trainclock_progress_unit"].value == "images"
    assert header["dataset"].value == "toy patterns"  # the workload's own flag reached it
    accuracy = [e for e in events if e.key == "eval_accuracy"]
    assert accuracy[0].metadata["epoch_num"] == 0.25  # a quarter of the 4,096 training images
    stop = [e for e in events if e.key == "run_stop"][0]
    assert stop.metadata["status"] == "success"
    assert not log.path.stat().st_mode & 0o111  # a log is data, never executable (it was 0755)


def test_the_review_reads_progress_in_images_from_a_log_counting_epochs(one_run):
    from trainclock.review.run_review import review_log

    out, _ = one_run
    run = review_log(log_path(out, TOY_MEMBER), "3.1")
    evaluated = [r["samples"] for r in records(out, TOY_MEMBER) if "eval" in r]
    assert run.progress_unit == "images" and run.converged_at in evaluated  # epochs x 4,096 images, not epochs
    assert run.samples_to_converge == run.converged_at


def test_review_and_results_store_take_it(one_run):
    out, _ = one_run
    review = toy("review", str(log_path(out, TOY_MEMBER)))
    assert review.returncode == 0, review.stdout + review.stderr
    listed = toy("results", "list", "--benchmark", "toyvision-tiny", "--db", f"sqlite:///{out}/store.sqlite")
    assert listed.returncode == 0 and "toyvision-tiny" in listed.stdout, listed.stdout + listed.stderr


def test_two_processes_match_one(tmp_path):
    one = toy(*toy_run(tmp_path / "one", "--seed", "4", "--max-samples", "1024"))
    two = toy(*toy_run(tmp_path / "two", "--seed", "4", "--max-samples", "1024", "--nproc", "2"))
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stderr[-3000:]
    assert_same_loss_curve(TOY_MEMBER, tmp_path / "one", tmp_path / "two", steps=16)
    # gathered over ranks: the same set
    assert evaluations(tmp_path / "two", TOY_MEMBER) == evaluations(tmp_path / "one", TOY_MEMBER)


def test_two_processes_take_the_background_score_together(tmp_path):
    """Rank 0 scores, both ranks take its values at the same read: the same evaluations as one
    process scoring inline, and the last, pending at the sample limit, is waited for."""
    one = toy(*toy_run(tmp_path / "one", "--seed", "4", "--max-samples", "2048"))
    two = toy(*toy_run(tmp_path / "two", "--seed", "4", "--max-samples", "2048", "--nproc", "2",
                       "--background-scoring", "0.3"))
    assert one.returncode in (0, 1) and two.returncode in (0, 1), two.stderr[-3000:]
    assert len(evaluations(tmp_path / "one", TOY_MEMBER)) == 2
    assert evaluations(tmp_path / "two", TOY_MEMBER) == evaluations(tmp_path / "one", TOY_MEMBER)
    assert check(log_path(tmp_path / "two", TOY_MEMBER)) == []


def test_resume_after_kill_9_continues_the_run_with_its_seed(tmp_path):
    """No --seed on either command: the resume takes the checkpoint's seed instead of refusing it."""
    kill_at_first_checkpoint(tmp_path, TOY_MEMBER, "--no-progress", "--precision", "fp32", "--checkpoint-every", "8",
                             "--max-samples", "4096", "--dataset-name", "resumed patterns", timeout=120,
                             real_data=False, **TOY)
    renamed = toy(*toy_run(tmp_path, "--resume", "--dataset-name", "other"))  # the workload's own flag
    assert renamed.returncode == 2 and "--dataset-name other differs from the run being resumed" in renamed.stderr
    resumed = toy(*toy_run(tmp_path, "--checkpoint-every", "8", "--max-samples", "4096", "--resume"))
    assert resumed.returncode in (0, 1), resumed.stderr[-3000:]
    assert "torch.distributed is disabled" not in resumed.stderr + resumed.stdout
    resumed_log_events(tmp_path, TOY_MEMBER)
    differing = toy(*toy_run(tmp_path, "--resume", "--gbs", "32"))
    assert differing.returncode == 2


@pytest.mark.slow
def test_runs_make_an_entry_scored_by_the_review(tmp_path):
    proc = toy(*toy_run(tmp_path, "--runs", "5", "--seed", "20"), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from trainclock.mllog.time_to_train import time_to_train_ms
    from trainclock.review.scoring import olympic_mean

    minutes = []
    seeds = []
    for i in range(5):
        events, _ = read_events(log_path(tmp_path, TOY_MEMBER, i))
        minutes.append(time_to_train_ms(events) / 60000)
        seeds.append(next(e.value for e in events if e.key == "seed"))
    assert seeds == [20, 21, 22, 23, 24]
    score = olympic_mean(minutes, drop=1)
    assert f"entry score {score:.4f} min" in proc.stdout


def test_html_report_and_served_page_label_it_from_the_workload(one_run, tmp_path):
    out, _ = one_run
    db = f"sqlite:///{out}/store.sqlite"
    report = toy("report", "--db", db, "--out", str(tmp_path / "report"), "--runs", str(out))
    assert report.returncode == 0, report.stdout + report.stderr
    html = "\n".join(p.read_text() for p in (tmp_path / "report").glob("*.html"))
    assert "toyvision-tiny" in html and "top-1 accuracy" in html and "images" in html
    assert "log perplexity" not in html  # nothing of GPT-3's labels on a store without GPT-3

    from trainclock.report.web import create_app
    from trainclock.results.db import open_store

    with open_store(db) as store:
        http = create_app(store, runs_dir=out).test_client()
        page = http.get("/?benchmark=toyvision-tiny").get_data(as_text=True)
        entries = http.get("/api/entries").get_json()["entries"]
    assert "toyvision-tiny" in page and "top-1 accuracy" in page
    assert [e["benchmark"] for e in entries] == ["toyvision-tiny"]


def test_background_scoring_trains_on_while_the_score_is_computed(one_run, tmp_path):
    """EvalSchedule.background_scoring (NVIDIA's v3.1 detection logs): the same predictions at the
    same points as inline evaluation, scored on a thread while the next block trains; the log shows
    eval_start, the next block_start, then the score; the run ends, timed, once a passing score is in."""
    inline_out, _ = one_run
    inline = [(r["samples"], r["eval"]) for r in records(inline_out, TOY_MEMBER) if "eval" in r]
    proc = toy(*toy_run(tmp_path, "--seed", "3", "--dataset-name", "toy patterns", "--background-scoring", "0.5"))
    assert proc.returncode == 0 and "run success" in proc.stdout, proc.stderr[-3000:]
    rows = records(tmp_path, TOY_MEMBER)
    background = [(r["samples"], r["eval"]) for r in rows if "eval" in r]
    assert background == inline  # the same models scored: the same values, up to the same first pass
    for i, row in enumerate(rows):
        if "eval" in row:  # the score came in after later steps had trained
            assert rows[i - 1]["samples"] > row["samples"], rows[i - 1]
    trained = [r["samples"] for r in rows if "loss" in r]
    assert trained[-1] > inline[-1][0]  # training went on until the passing score arrived
    events = checked_log(tmp_path, TOY_MEMBER).events
    keys = [e.key for e in events if e.key in ("eval_start", "block_start", "eval_accuracy", "run_stop")]
    first_eval = keys.index("eval_start")
    assert keys[first_eval:first_eval + 3] == ["eval_start", "block_start", "eval_accuracy"]
    assert keys[-2:] == ["eval_accuracy", "run_stop"]
    stop = next(e for e in events if e.key == "run_stop")
    assert stop.metadata["status"] == "success"
    assert stop.time_ms >= max(e.time_ms for e in events if e.key == "eval_stop")  # the scoring is timed


def test_offline_evaluation_scores_the_saved_models_after_training_off_the_clock(one_run, tmp_path):
    """EvalSchedule.offline (Stable Diffusion's rule): the same training, the models saved at the
    evaluation points and scored after it, in order up to the first that passes; run_stop carries
    the time that model was saved, so the evaluations are not in the time-to-train."""
    inline_out, _ = one_run
    inline = [(r["samples"], r["eval"]) for r in records(inline_out, TOY_MEMBER) if "eval" in r]
    limit = inline[-1][0] + 2 * 1024  # two evaluation points past the inline run's first pass
    proc = toy(*toy_run(tmp_path, "--seed", "3", "--dataset-name", "toy patterns", "--offline-eval",
                        "--max-samples", str(limit)))
    assert proc.returncode == 0 and "run success" in proc.stdout, proc.stderr[-3000:]
    offline = [(r["samples"], r["eval"]) for r in records(tmp_path, TOY_MEMBER) if "eval" in r]
    assert offline == inline  # the same models, scored later: the same values, up to the same first pass
    trained = [r["samples"] for r in records(tmp_path, TOY_MEMBER) if "loss" in r]
    assert trained[-1] == limit  # no evaluation during training: it runs to its limit
    events = checked_log(tmp_path, TOY_MEMBER).events
    by_key = lambda key: [e for e in events if e.key == key]  # noqa: E731
    last_block = by_key("block_stop")[-1]
    assert all(e.time_ms >= last_block.time_ms for e in by_key("eval_start"))
    start, stop = by_key("run_start")[0], by_key("run_stop")[0]
    assert stop.metadata["status"] == "success"
    assert stop.time_ms < by_key("eval_stop")[-1].time_ms  # the scoring after training is not timed
    assert start.time_ms < stop.time_ms <= last_block.time_ms
    assert not any((tmp_path / "checkpoints").rglob("samples_*"))  # the snapshots go once scored
