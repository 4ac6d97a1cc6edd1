"""End-to-end runs of gpt3-tiny through the CLI, and the log they leave."""

import json
import subprocess
import sys
from collections import Counter

import pytest
import torch

from trainclock.cli import main
from trainclock.mllog import RunLog
from trainclock.mllog.reader import read_events
from trainclock.mllog.time_to_train import time_to_train_ms
from trainclock.distributed.context import single_process
from trainclock.train.options import TrainOptions
from trainclock.train.run import RunRequest, log_header
from trainclock.workload.base import RunSettings
from trainclock.workloads.gpt3 import WORKLOAD
from trainclock.workloads.gpt3.workload import gpt3_job
from trainclock.workloads.gpt3.spec import get_member

import official_checker


def run_tiny(tmp_path, corpus_dir, *extra):
    out = tmp_path / "out"
    code = main(["run", "gpt3-tiny", "--data", str(corpus_dir), "--out", str(out), "--no-progress", *extra])
    logs = sorted(out.glob("results/*/gpt3-tiny/result_*.txt"))
    return code, out, logs


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, corpus_dir):
    tmp = tmp_path_factory.mktemp("tiny")
    code, out, logs = run_tiny(tmp, corpus_dir, "--seed", "7")
    return code, out, logs


def test_tiny_trains_to_its_target(tiny_run):
    code, out, logs = tiny_run
    assert code == 0 and len(logs) == 1
    events, problems = read_events(logs[0])
    assert not problems
    evals = [e.value for e in events if e.key == "eval_accuracy"]
    target = get_member("gpt3-tiny").quality[0].threshold
    metrics = [json.loads(line) for line in logs[0].with_name("result_0.metrics.jsonl").read_text().splitlines()]
    losses = [m["loss"] for m in metrics if "loss" in m]
    assert evals[-1] <= target < losses[0]  # reached the target, from above it
    assert all(e > target for e in evals[:-1])  # and stopped at the first evaluation that did
    stop = [e for e in events if e.key == "run_stop"][0]
    assert stop.metadata["status"] == "success"
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5  # the training loss fell


def test_the_log_passes_the_official_common_rules(tiny_run):
    _, _, logs = tiny_run
    assert official_checker.check(logs[0]) == []


def test_the_log_has_every_required_key_once_and_in_order(tiny_run):
    _, out, logs = tiny_run
    events, _ = read_events(logs[0])
    keys = [e.key for e in events]
    counts = Counter(keys)
    once = ["submission_benchmark", "submission_org", "submission_division", "submission_status", "submission_platform",
            "init_stop", "run_start", "run_stop", "global_batch_size", "max_sequence_length", "gradient_accumulation_steps",
            "opt_name", "opt_base_learning_rate", "opt_end_learning_rate", "opt_learning_rate_warmup_steps",
            "opt_learning_rate_decay_steps", "opt_learning_rate_decay_schedule", "opt_adam_beta_1", "opt_adam_beta_2",
            "opt_adam_epsilon", "opt_gradient_clip_norm", "seed", "train_samples", "eval_samples", "cache_clear"]
    for key in once:
        assert counts[key] == 1, key
    assert keys[0] == "init_start"
    assert max(keys.index(k) for k in once if k.startswith("submission_")) < keys.index("init_stop") < keys.index("run_start")
    assert counts["eval_start"] == counts["eval_accuracy"] == counts["eval_stop"] >= 1
    assert counts["block_start"] == counts["block_stop"]
    assert all("file" in e.metadata and "lineno" in e.metadata for e in events)
    evals = [e for e in events if e.key == "eval_accuracy"]
    assert all(e.metadata["epoch_num"] % get_member("gpt3-tiny").seq_len == 0 for e in evals)  # tokens
    system = json.loads(next(out.glob("systems/*.json")).read_text())
    assert system["framework"].startswith("PyTorch") and system["division"] == "open"


def test_printed_time_to_train_equals_run_stop_minus_run_start(tmp_path, corpus_dir, capsys):
    code, _, logs = run_tiny(tmp_path, corpus_dir, "--seed", "7", "--max-samples", "1024")
    printed = capsys.readouterr().out
    events, _ = read_events(logs[0])
    minutes = time_to_train_ms(events) / 60000
    assert f"{minutes:.3f} min" in printed



def test_profile_writes_a_trace_and_says_where_the_step_went(tmp_path, corpus_dir, capsys):
    code, _, logs = run_tiny(tmp_path, corpus_dir, "--seed", "7", "--max-samples", "256", "--profile", "3")
    printed = capsys.readouterr().out
    trace = logs[0].with_name("result_0.profile.json")
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert {"forward and backward", "optimizer", "batch assembly"} <= names  # the loop's regions, labelled
    assert sum(str(n).startswith("ProfilerStep") for n in names) == 3  # the 3 profiled steps, after 2
    assert "where a step's time went: 3 profiled steps" in printed and "aten::" in printed
    assert "outside forward, backward and optimizer" in printed
    logged = [e for e in read_events(logs[0])[0] if e.key == "trainclock_profiled_steps"]
    assert [e.value for e in logged] == [3]  # the log says its times carry the profiler's cost

def curve(tmp_path, corpus_dir, seed):
    # fp32: under "auto" a loaded machine may measure bf16 slower on one run and faster on the next
    # 512 samples: the last of them is an evaluation, so a run that meets the target there stops at the same step
    _, _, logs = run_tiny(tmp_path, corpus_dir, "--seed", str(seed), "--max-samples", "512", "--precision", "fp32")
    metrics = logs[-1].with_name(logs[-1].stem + ".metrics.jsonl").read_text().splitlines()
    return [json.loads(m)["loss"] for m in metrics if "loss" in json.loads(m)]


def test_same_seed_same_curve_other_seed_other_curve(tmp_path, corpus_dir):
    a, b, c = curve(tmp_path, corpus_dir, 1), curve(tmp_path, corpus_dir, 1), curve(tmp_path, corpus_dir, 2)
    assert len(a) == 16 and a == b
    assert a != c


def test_the_175b_header_satisfies_the_official_closed_gpt3_rules(tmp_path):
    spec = get_member("gpt3-175b")
    job = gpt3_job(spec, torch.nn.Identity(), None, None, None, dataset="c4", eval_sequences=5659)
    request = RunRequest(workload=WORKLOAD, spec=spec, settings=RunSettings(), out=tmp_path, seed=1,
                         options=TrainOptions(device=torch.device("cpu")))
    log = RunLog(tmp_path / "result_0.txt")
    log.start("init_start")
    log_header(log, job, request, "test-system", single_process(), seed=1)
    log.end("init_stop")
    log.start("run_start")
    log.start("block_start", metadata={"first_epoch_num": 0, "epoch_count": 50331648})
    log.end("block_stop", metadata={"first_epoch_num": 0})
    log.start("eval_start", metadata={"epoch_num": 50331648})
    log.event("eval_accuracy", 2.68, metadata={"epoch_num": 50331648})
    log.end("eval_stop", metadata={"epoch_num": 50331648})
    log.event("train_samples", 50331648)
    log.end("run_stop", metadata={"status": "success"})
    assert official_checker.check(log.finish(), follow=True) == []



def test_the_header_discloses_precisions_layout_and_configuration_as_round_61_asks(tmp_path):
    from dataclasses import replace

    from trainclock.train.run import disclosure_keys

    spec = get_member("gpt3-175b")
    job = gpt3_job(spec, torch.nn.Identity(), None, None, None, dataset="c4", eval_sequences=5659)
    keys = disclosure_keys(job, "bf16", single_process())
    assert keys == {"lowest_numerical_precision_in_linear": "bfloat16", "lowest_numerical_precision_in_attn": "bfloat16",
                    "lowest_numerical_precision_in_comm": "fp32", "tensor_parallelism": 1, "pipeline_parallelism": 1,
                    "context_parallelism": 1, "expert_parallelism": 1, "micro_batch_size": spec.micro_batch_size,
                    "config_filename": "gpt3-175b"}
    assert disclosure_keys(replace(job, linear_precision="fp8"), "bf16", single_process())[
        "lowest_numerical_precision_in_linear"] == "fp8"
    assert "lowest_numerical_precision_in_attn" not in disclosure_keys(job, "auto", single_process())


BAD_INPUTS = {
    "unknown benchmark": (["run", "gpt3-huge"], "unknown benchmark 'gpt3-huge'"),
    "absurd batch": (["run", "gpt3-tiny", "--gbs", "0"], "global batch size 0"),
    "batch not divisible": (["run", "gpt3-tiny", "--gbs", "30", "--micro-batch", "8"], "must be positive and divide"),
    "175b on a cpu": (["run", "gpt3-175b", "--device", "cpu"], "GiB"),
    "missing data": (["run", "gpt3-tiny", "--data", "/nonexistent/corpus.txt"], "no data files found"),
    "negative limit": (["run", "gpt3-tiny", "--max-minutes", "-1"], "must be positive"),
    "schedule without a pipeline": (["run", "gpt3-tiny", "--nproc", "2", "--pp-schedule", "gpipe"], "add --pp 2"),
    "virtual stages without interleaving": (["run", "gpt3-tiny", "--nproc", "2", "--pp", "2", "--pp-schedule", "1f1b",
                                             "--vp", "2"], "does not go with the 1f1b schedule"),
    "too few micro-batches for 1f1b": (["run", "gpt3-tiny", "--nproc", "2", "--pp", "2", "--micro-batch", "32"],
                                       "needs at least pp = 2 micro-batches"),
    "more stages than layers": (["run", "gpt3-tiny", "--nproc", "2", "--pp", "2", "--vp", "3"], "exceed the 4 layers"),
    # found by careless input (issue 11): tracebacks or silent acceptance before
    "no processes": (["run", "gpt3-tiny", "--nproc", "0"], "--nproc must be positive"),
    "no nodes": (["run", "gpt3-tiny", "--nnodes", "0"], "--nnodes must be positive"),
    "negative seed": (["run", "gpt3-tiny", "--seed", "-1"], "--seed -1 is out of range"),
    "huge seed": (["run", "gpt3-tiny", "--seed", "99999999999999999999999"], "is out of range"),
    "zero micro-batch": (["run", "gpt3-tiny", "--micro-batch", "0"], "--micro-batch must be positive"),
    "negative restarts": (["run", "gpt3-tiny", "--max-restarts", "-1"], "--max-restarts must be 0 or more"),
    "negative profile": (["run", "gpt3-tiny", "--profile", "-2"], "--profile must be 0 or more"),
    "no runs": (["run", "gpt3-tiny", "--runs", "0"], "--runs 0 is out of range"),
    "node rank outside": (["run", "gpt3-tiny", "--nnodes", "2", "--node-rank", "2"], "--node-rank 2 must be"),
    "store in memory": (["run", "gpt3-tiny", "--db", "sqlite:///:memory:"], "memory"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_gives_one_line_and_leaves_no_result(tmp_path, case, corpus_dir):
    argv, message = BAD_INPUTS[case]
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "trainclock.cli", *argv, "--out", str(out), "--no-progress"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr
    assert not list(out.rglob("result_*"))


def test_unwritable_output_dir_is_reported(tmp_path, corpus_dir, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code = main(["run", "gpt3-tiny", "--data", str(corpus_dir), "--out", str(blocker / "out"), "--no-progress"])
    assert code == 2
    assert "cannot write to output directory" in capsys.readouterr().err


def test_corrupt_data_aborts_init_and_leaves_no_result(tmp_path, corpus_dir, capsys):
    from trainclock.workloads.gpt3.data.prepare import prepare
    from trainclock.workloads.gpt3.data.sources import parse_source

    data = prepare(parse_source(str(corpus_dir)), get_member("gpt3-tiny").shape.vocab_size)
    (data.folder / "train.bin").write_bytes(b"\x00" * 10)
    code, out, _ = run_tiny(tmp_path, corpus_dir, "--seed", "1")
    assert code == 2
    err = capsys.readouterr().err
    assert "train.bin is corrupt" in err and "--force" in err
    assert not list(out.rglob("result_*"))


def test_the_log_says_how_it_counts_progress_as_the_codec_reads_it_back():
    from trainclock.mllog.progress import ProgressCodec
    from trainclock.workload.base import Progress

    counts = {"units": [0, 640 * 2048, 6400 * 2048], "samples": [0, 640, 6400], "epochs": [0.0, 0.64, 6.4],
              "steps": [0, 10, 100]}
    for progress in (Progress("tokens", 2048, "epoch_num", "units"), Progress("samples", 1, "samples_count", "samples"),
                     Progress("images", 1, "epoch_num", "epochs", samples_per_epoch=1000),
                     Progress("images", 1, "step_num", "steps", samples_per_step=64)):
        codec = progress.codec  # the one place a count is computed: the log writer's and the loop's
        key, unit, metadata = codec.header()
        assert (key, unit, metadata) == ("trainclock_progress_unit", progress.unit, {
            "per_sample": progress.units_per_sample, "logged_in": progress.log_in,
            "samples_per_epoch": progress.samples_per_epoch})
        assert [codec.count(n) for n in (0, 640, 6400)] == counts[progress.log_in]
        assert [codec.units_in(n) for n in (0, 640)] == [0, 640 * progress.units_per_sample]
        read = ProgressCodec.read(unit, metadata, progress.samples_per_step)
        assert read.units(codec.count(6400)) == 6400 * progress.units_per_sample
