"""The generic run and CLI under a full disk, signals and careless input: one line, exit code, and
no file left that looks complete when it is not (issue: reliability of the run/CLI)."""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.workloads.helpers import ROOT, TOY, TOY_MEMBER, environment, error_line, toy_run


@pytest.fixture
def toy_env(monkeypatch):
    """The test-only workload, in this process (the `cli` fixture)."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("TRAINCLOCK_WORKLOADS", TOY["TRAINCLOCK_WORKLOADS"])


def leftovers(out: Path) -> list[str]:
    """Files a failed run must not leave: a log (partial or not), metrics, a checkpoint's temporary."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*")
                  if p.name.startswith("result_") or p.name.endswith(".tmp"))


def run_stop(log: Path) -> dict:
    stops = [json.loads(line.partition(":::MLLOG")[2]) for line in log.read_text().splitlines()
             if '"key": "run_stop"' in line]
    assert len(stops) == 1, log.read_text()[-2000:]
    return stops[0]


# 1. a full disk: one line, nothing half-written left behind

def test_disk_full_writing_the_system_description_is_one_line(cli, toy_env, tmp_path, monkeypatch):
    import trainclock.train.run as train_run

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(train_run, "atomic_write_text", full)
    out = tmp_path / "out"
    line = error_line(cli(*toy_run(out)))
    assert "no space left on device writing" in line and "systems" in line and "choose another --out" in line
    assert leftovers(out) == []


def test_disk_full_inside_a_checkpoint_save_leaves_no_partial_log_or_step_tmp(cli, toy_env, tmp_path, monkeypatch):
    import torch.distributed.checkpoint.filesystem as dcp_files

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(dcp_files, "_write_item", full)  # inside dcp.save, which wraps it in a CheckpointException
    out = tmp_path / "out"
    line = error_line(cli(*toy_run(out, "--checkpoint-every", "5")))
    assert "no space left on device writing" in line and "checkpoints" in line
    assert leftovers(out) == []


def test_permission_denied_during_a_run_is_one_line(cli, toy_env, tmp_path, monkeypatch):
    import trainclock.train.run as train_run

    def denied(path, resume_at):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(train_run, "_open_metrics", denied)
    out = tmp_path / "out"
    line = error_line(cli(*toy_run(out)))
    assert "permission denied writing" in line and "metrics.jsonl" in line
    assert leftovers(out) == []


# 2. --system is one safe folder name

@pytest.mark.parametrize("name", ["../../../escaped_sys", "a/b", "", ".hidden", "-x", "x" * 200])
def test_system_name_must_be_one_safe_path_component(cli, toy_env, tmp_path, name):
    out = tmp_path / "deep" / "er" / "out"
    line = error_line(cli(*toy_run(out), f"--system={name}"))
    assert "--system" in line and "is not a system name" in line
    assert not list(tmp_path.rglob("*escaped_sys*")) and not out.exists()


def test_launch_refuses_a_bad_system_name_before_writing_the_job(cli, toy_env, tmp_path):
    out = tmp_path / "out"
    line = error_line(cli("launch", "slurm", TOY_MEMBER, "--nodes", "2", "--gpus-per-node", "1", "--out", out,
                          "--", "--system", "a/b"))
    assert "is not a system name" in line and not out.exists()


# 3. signals: SIGTERM as SIGINT; an interrupted run without a checkpoint is closed as aborted

INTERRUPTER = textwrap.dedent("""
    # trainclock run, with a signal sent to itself mid-training once `trigger` exists
    import os, signal, sys
    from pathlib import Path
    from trainclock.train import progress

    out, signum, trigger = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    stepped = progress.TrainProgress.stepped
    sent = []

    # at the first progress update once `trigger` exists, before the loop can stop at its target: the
    # toy's fresh seed sometimes meets it at its first evaluation (step 16), which a wait for step 20 missed
    def stepping(self, steps, *args, **kwargs):
        if not sent and list(out.glob(trigger)):
            sent.append(steps)
            os.kill(os.getpid(), signum)
        return stepped(self, steps, *args, **kwargs)

    progress.TrainProgress.stepped = stepping
    from trainclock.cli import main
    sys.exit(main(sys.argv[4:]))
""")


def interrupted(tmp_path: Path, signum: int, *run_args: str, trigger: str = "results/*/*/result_0.txt.partial"):
    script = tmp_path / "interrupter.py"
    script.write_text(INTERRUPTER)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(script), str(out), str(int(signum)), trigger, *toy_run(out, *run_args)],
                          capture_output=True, text=True, timeout=300, env=environment(real_data=False, **TOY), cwd=ROOT)
    return proc, out


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_run_is_closed_as_aborted(tmp_path, signum):
    proc, out = interrupted(tmp_path, signum, "--max-samples", "100000")
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == "trainclock: interrupted" and "Traceback" not in proc.stderr
    assert not list(out.rglob("*.partial"))  # no index used up by a log that never ends
    (log,) = out.glob(f"results/*/{TOY_MEMBER}/result_0.txt")
    assert run_stop(log)["metadata"]["status"] == "aborted"
    from trainclock.review.run_review import review_log

    review = review_log(log, "3.1")  # the review reads it: an aborted run, not a damaged log
    assert review.status == "aborted" and review.time_to_train_ms is not None


def test_an_interrupted_run_with_a_checkpoint_keeps_its_partial_log_for_resume(tmp_path):
    proc, out = interrupted(tmp_path, signal.SIGTERM, "--max-samples", "100000", "--checkpoint-every", "5",
                            trigger="checkpoints/*/*/result_0/step_*/trainclock.json")
    assert proc.returncode == 130 and "trainclock: interrupted" in proc.stderr, proc.stderr[-3000:]
    assert list(out.glob(f"results/*/{TOY_MEMBER}/result_0.txt.partial"))
    assert not list(out.glob(f"results/*/{TOY_MEMBER}/result_0.txt"))
    assert not list(out.rglob(".step_*.tmp"))


def test_an_interrupted_entry_scores_its_finished_runs_as_incomplete(tmp_path):
    proc, out = interrupted(tmp_path, signal.SIGTERM, "--runs", "3", "--seed", "3",
                            trigger="results/*/*/result_1.txt.partial")
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert "trainclock: the entry is incomplete: interrupted after 1 of 3 runs" in proc.stdout, proc.stdout[-3000:]
    folder = next(out.glob(f"results/*/{TOY_MEMBER}"))
    assert run_stop(folder / "result_0.txt")["metadata"]["status"] == "success"
    assert run_stop(folder / "result_1.txt")["metadata"]["status"] == "aborted"
    assert not list(out.rglob("*.partial")) and not (folder / "result_2.txt").exists()


# 4. messages

def test_data_that_is_a_file_is_not_called_missing(cli, tmp_path):
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0:root:/root:/bin/bash\n")
    line = error_line(cli("run", "resnet-tiny", "--data", a_file, "--out", tmp_path / "out", "--no-progress"))
    assert "is a file, not a folder" in line and "does not exist" not in line


@pytest.mark.parametrize("reader", [
    "trainclock.workloads.resnet.data.folder:scan",
    "trainclock.workloads.detection.data.layout:split_files",
    "trainclock.workloads.dlrm_dcnv2.data.dataset:open_days",
    "trainclock.workloads.rnnt.data.prepare:prepare_official",
    "trainclock.workloads.unet3d.data.npy:load_split",
    "trainclock.workloads.unet3d.data.prepare:prepare_official",
])
def test_every_data_folder_reader_tells_a_file_from_a_missing_folder(tmp_path, reader):
    import importlib
    import inspect

    from trainclock.errors import DataError

    module, name = reader.split(":")
    read = getattr(importlib.import_module(module), name)
    others = [None] * (len(inspect.signature(read).parameters) - 1)  # never reached: the folder is checked first
    a_file = tmp_path / "passwd"
    a_file.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(DataError, match="is a file, not a folder"):
        read(a_file, *others)
    with pytest.raises(DataError, match="does not exist"):
        read(tmp_path / "missing", *others)


def test_empty_data_is_refused(cli, toy_env, tmp_path):
    line = error_line(cli(*toy_run(tmp_path / "out"), "--data", ""))
    assert "--data is empty" in line


@pytest.mark.parametrize("argv", [
    ["launch", "slurm", TOY_MEMBER, "--nodes", "100000000000", "--gpus-per-node", "8"],
    ["launch", "slurm", TOY_MEMBER, "--nodes", "2", "--gpus-per-node", "100000"],
    ["launch", "k8s", TOY_MEMBER, "--nodes", "100000000000", "--gpus-per-node", "8", "--image", "x"],
], ids=["slurm nodes", "slurm gpus per node", "k8s nodes"])
def test_launch_bounds_the_job_shape_and_writes_nothing(cli, toy_env, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    line = error_line(cli(*argv, "--out", tmp_path / "job"))
    assert "is more than trainclock supports" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--nproc", "--nnodes"])
def test_run_bounds_the_process_counts(cli, toy_env, tmp_path, flag):
    line = error_line(cli(*toy_run(tmp_path / "out"), flag, "100000000000"))
    assert f"{flag} 100,000,000,000 is more than trainclock supports" in line


def test_profile_keeps_the_profilers_native_noise_out_of_the_output(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "trainclock.cli", *toy_run(out, "--profile", "3", "--max-samples", "640")],
                          capture_output=True, text=True, timeout=300, env=environment(real_data=False, **TOY), cwd=ROOT)
    assert "where a step's time went: 3 profiled steps" in proc.stdout, proc.stderr[-3000:]
    for noise in ("USDT:", "gpuGetDeviceCount", "profiler_start", "SyncActivityProfilerHandler"):
        assert noise not in proc.stderr + proc.stdout


def test_an_imported_name_too_long_is_refused_in_one_line(cli, toy_env, tmp_path):
    out = tmp_path / "out"
    code, _, err = cli(*toy_run(out, "--max-samples", "640"))
    assert code in (0, 1), err
    (log,) = out.glob(f"results/*/{TOY_MEMBER}/result_0.txt")
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        if '"key": "submission_benchmark"' in line:
            event = json.loads(line.partition(":::MLLOG ")[2])
            event["value"] = "b" * 20_000
            lines[i] = ":::MLLOG " + json.dumps(event)
    copy = tmp_path / "import" / "result_0.txt"
    copy.parent.mkdir()
    copy.write_text("\n".join(lines) + "\n")
    line = error_line(cli("results", "import", copy, "--db", tmp_path / "store.db"))
    # (the review keeps a header value's first 4,000 characters; either count is past the limit)
    assert "submission_benchmark is" in line and "characters long" in line and "File name too long" not in line
    code, out_text, err = cli("review", copy)  # the review looks up a rule file by that name: none, in one piece
    assert "File name too long" not in out_text + err and "Traceback" not in err, err[-2000:]


def test_a_reader_that_goes_away_is_no_traceback(tmp_path):
    import os

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    proc = subprocess.run([sys.executable, "-m", "trainclock.cli", "list", "--names"], stdout=write,
                          stderr=subprocess.PIPE, text=True)
    os.close(write)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr
