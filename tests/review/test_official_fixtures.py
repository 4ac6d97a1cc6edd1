"""The real MLPerf logs in shared/mlperf-results: the official scores and verdicts, exactly."""

from __future__ import annotations

import pytest

from trainclock.review.entry import INCOMPLETE, VALID

# shared/mlperf-results/README.md: the official summarizer's scores, in minutes
ENTRIES = {
    "v3.0/Intel-HabanaLabs/HLS-Gaudi2-N48-PT/gpt3": ([311.322500, 325.340400, 311.944883], 311.944883),
    "v3.0/NVIDIA_CoreWeave/coreweave_hgxh100_n448_ngc23.04_pytorch/gpt3": (None, 10.940417),
    "v3.1/Intel-HabanaLabs/HLS-Gaudi2-N48-PT/gpt3": ([153.583617, 153.540550, 153.581333], 153.581333),
    "v3.1/NVIDIA/eos_n8_ngc23.04_pytorch/bert": (None, 0.898131),
}
SINGLE_LOGS = {
    "v3.1/Google/cloud-tpu-v5e-4096-PAX/gpt3": 44.471883,
    "v3.1/NVIDIA/eos_n64_ngc23.09_nemo/gpt3": 58.246867,
    "v3.1/Dell/XE9680x8H100-SXM-80GB/stable_diffusion": 45.611733,
    "v3.1/NVIDIA/eos_ngc23.04_pytorch/bert": 4.514317,
}
BERT = "v3.1/NVIDIA/eos_n8_ngc23.04_pytorch/bert"


def test_every_fixture_is_found(shared_entries):
    assert set(shared_entries) == set(ENTRIES) | set(SINGLE_LOGS)


@pytest.mark.parametrize("entry_id", ENTRIES)
def test_complete_entries_score_as_officially_published(shared_entries, entry_id):
    runs, score = ENTRIES[entry_id]
    entry = shared_entries[entry_id]
    assert entry.verdict == VALID and entry.ok
    assert entry.score_minutes == pytest.approx(score, abs=1e-6)
    if runs:
        assert [r.minutes for r in entry.runs] == pytest.approx(runs, abs=1e-6)


@pytest.mark.parametrize("entry_id", SINGLE_LOGS)
def test_single_logs_have_their_time_to_train_and_no_score(shared_entries, entry_id):
    entry = shared_entries[entry_id]
    (run,) = entry.runs
    assert run.passed and run.status == "success"
    assert run.minutes == pytest.approx(SINGLE_LOGS[entry_id], abs=1e-6)
    assert entry.verdict == INCOMPLETE and entry.score_minutes is None and entry.ok


def test_the_bert_run_that_never_converged_counts_as_the_slowest(shared_entries):
    entry = shared_entries[BERT]
    failed = entry.failed_runs
    assert [r.path.name for r in failed] == ["result_4.txt"]
    run = failed[0]
    assert run.status == "aborted" and run.converged_at is None
    target = [f for f in run.errors if f.rule == "training_3.1.0/closed_bert.yaml"]
    assert len(target) == 1 and target[0].key == "eval_accuracy" and "0.7197520136833191" in target[0].message
    (status,) = [f for f in run.errors if f.rule == "trainclock/common.yaml"]
    assert status.key == "run_stop" and status.lineno == 517 and "'aborted'" in status.message
    # the olympic mean then drops only the fastest run
    passing = sorted(r.minutes for r in entry.runs if r.passed)
    assert entry.score_minutes == pytest.approx(sum(passing[1:]) / 8, rel=1e-12)


def test_gpt3_tokens_to_target_match_the_published_calibration(shared_entries):
    # gpt3_results_calibration.csv: the v3.0 CoreWeave 3,584-H100 runs each took 1,211,105,280 tokens
    entry = shared_entries["v3.0/NVIDIA_CoreWeave/coreweave_hgxh100_n448_ngc23.04_pytorch/gpt3"]
    assert [r.converged_at for r in entry.runs] == [1211105280] * 3
    assert {r.progress_unit for r in entry.runs} == {"tokens"}
    assert [r.samples_to_converge for r in entry.runs] == [1211105280 / 2048] * 3  # sequences of 2,048 tokens
    bert = shared_entries[BERT].runs[0]
    assert bert.samples_to_converge == bert.converged_at == 3004416 and bert.tokens_to_converge is None


def test_stable_diffusion_converges_at_the_first_checkpoint_meeting_fid_and_clip(shared_entries):
    (run,) = shared_entries["v3.1/Dell/XE9680x8H100-SXM-80GB/stable_diffusion"].runs
    assert run.converged_at == 5000 and run.progress_unit == "steps"
    fid = {p.progress: p.value for p in run.evals if p.metric == "FID"}
    assert fid[4000] > 90 >= fid[5000]  # FID is evaluated offline, after run_stop, out of order


def test_eval_curves_are_in_progress_order_whatever_the_file_order(shared_entries):
    (google,) = shared_entries["v3.1/Google/cloud-tpu-v5e-4096-PAX/gpt3"].runs
    assert len(google.evals) == 24
    for entry in shared_entries.values():
        for run in entry.runs:
            keys = [(p.progress, p.time_ms) for p in run.evals]
            assert keys == sorted(keys) and None not in {p for p, _ in keys}


def test_system_descriptions_give_accelerators_and_fields(shared_entries):
    coreweave = shared_entries["v3.0/NVIDIA_CoreWeave/coreweave_hgxh100_n448_ngc23.04_pytorch/gpt3"]
    assert coreweave.accelerators == 3584 and coreweave.org == "NVIDIA+CoreWeave"
    assert coreweave.context.system_desc["accelerator_model_name"] == "NVIDIA H100-SXM5-80GB"
    assert shared_entries["v3.1/Intel-HabanaLabs/HLS-Gaudi2-N48-PT/gpt3"].accelerators == 384
    google = shared_entries["v3.1/Google/cloud-tpu-v5e-4096-PAX/gpt3"]
    assert google.context.system_desc is None and google.accelerators is None and google.org == "Google"


def test_closed_entries_pass_the_reference_convergence_check(shared_entries):
    for entry_id in ENTRIES:
        rcp = shared_entries[entry_id].rcp
        assert rcp.status == "pass" and rcp.binding and rcp.normalization == 1.0, entry_id


def test_rounds_come_from_the_round_folders(shared_entries):
    for entry_id, entry in shared_entries.items():
        assert entry.context.round == entry_id[1:4] and entry.context.round_source == "path"
        assert all(f.rule.startswith(("training_" + entry_id[1:4], "trainclock/")) for r in entry.runs for f in r.findings)
