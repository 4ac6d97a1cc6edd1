"""kill -9 at random points, during checkpoint writes too, then resume: the resumed run's loss
curve and evaluations equal the uninterrupted run's, step for step. And torchrun's elastic
agent restarts a group whose rank was killed, which resumes by itself."""

import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.distributed.helpers import evals, losses, run, start, tiny_args

CHECKPOINTS = ["--checkpoint-every", "2"]


@pytest.fixture(scope="module")
def uninterrupted(corpus_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    proc = run(tiny_args(corpus_dir, out, *CHECKPOINTS))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return losses(out), evals(out)


def wait_for(predicate, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def checkpoints(out: Path, pattern: str) -> list[Path]:
    return list(out.glob(f"checkpoints/*/gpt3-tiny/result_0/{pattern}"))


@pytest.mark.parametrize("trial", ["after-first-checkpoint", "random-1", "random-2", "during-checkpoint-write"])
def test_kill_9_then_resume_gives_the_same_curve(uninterrupted, corpus_dir, tmp_path, trial):
    reference_losses, reference_evals = uninterrupted
    victim = start(tiny_args(corpus_dir, tmp_path, *CHECKPOINTS))
    if trial == "during-checkpoint-write":
        wait_for(lambda: checkpoints(tmp_path, "step_*") and checkpoints(tmp_path, ".step_*.tmp"))
    else:
        wait_for(lambda: checkpoints(tmp_path, "step_*/trainclock.json"))
        time.sleep({"after-first-checkpoint": 0, "random-1": random.uniform(0, 1.5), "random-2": random.uniform(0, 3)}[trial])
    if victim.poll() is not None:
        pytest.skip("the run finished before it could be killed (machine too fast for this trial)")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    assert not list(tmp_path.glob("results/*/gpt3-tiny/result_0.txt"))  # no finished-looking result

    resumed = run(tiny_args(corpus_dir, tmp_path, *CHECKPOINTS, "--resume"))
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]
    assert losses(tmp_path) == reference_losses  # bit for bit
    assert evals(tmp_path) == reference_evals
    log = next(tmp_path.glob("results/*/gpt3-tiny/result_0.txt")).read_text()
    assert log.count('"key": "run_start"') == 1 and log.count('"key": "run_stop"') == 1
    assert '"key": "trainclock_resumed"' in log


def test_a_sharded_checkpoint_resumes_on_another_world_size(uninterrupted, corpus_dir, tmp_path):
    """FSDP2 on 2 processes writes sharded checkpoints; 1 process resumes from them (DCP reshards),
    reading the same samples: no sample is repeated or skipped across the change."""
    reference_losses, reference_evals = uninterrupted
    same_system = ["--system", "resized"]  # the default system name counts the processes
    victim = start(tiny_args(corpus_dir, tmp_path, "--nproc", "2", "--fsdp", *same_system, *CHECKPOINTS))
    wait_for(lambda: checkpoints(tmp_path, "step_*/trainclock.json"))
    if victim.poll() is not None:
        pytest.skip("the run finished before it could be killed (machine too fast for this trial)")
    os.killpg(victim.pid, signal.SIGKILL)  # the launcher and torchrun's agent; the workers have sessions of their own
    victim.wait()
    wait_for(lambda: not _processes_writing_to(tmp_path), timeout=10)  # they die with their agent
    elsewhere = run(tiny_args(corpus_dir, tmp_path, *CHECKPOINTS, "--resume"))  # the default system name
    assert elsewhere.returncode == 2 and "exist under system resized" in elsewhere.stderr and "--system" in elsewhere.stderr
    resumed = run(tiny_args(corpus_dir, tmp_path, *same_system, *CHECKPOINTS, "--resume"))
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]
    log = next(tmp_path.glob("results/resized/gpt3-tiny/result_0.txt")).read_text()
    assert '"key": "trainclock_resumed"' in log
    assert losses(tmp_path) == pytest.approx(reference_losses, rel=2e-4, abs=2e-4)  # steps in order, none repeated
    assert [tokens for tokens, _ in evals(tmp_path)] == [tokens for tokens, _ in reference_evals]


@pytest.mark.parametrize("before, after", [([], ["--nproc", "2", "--pp", "2", "--vp", "2"]),
                                           (["--nproc", "2", "--pp", "2"], [])],
                         ids=["plain-to-interleaved-pipeline", "pipeline-to-plain"])
def test_a_checkpoint_resumes_with_or_without_a_pipeline(uninterrupted, corpus_dir, tmp_path, before, after):
    """Pipeline stages save their parameters and optimizer state under the whole model's names
    (the last stage's tied head as the embedding), so a run resumes across pipeline layouts."""
    reference_losses, reference_evals = uninterrupted
    same_system = ["--system", "relaid"]
    victim = start(tiny_args(corpus_dir, tmp_path, *before, *same_system, *CHECKPOINTS))
    wait_for(lambda: checkpoints(tmp_path, "step_*/trainclock.json"))
    if victim.poll() is not None:
        pytest.skip("the run finished before it could be killed (machine too fast for this trial)")
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    wait_for(lambda: not _processes_writing_to(tmp_path), timeout=10)
    resumed = run(tiny_args(corpus_dir, tmp_path, *after, *same_system, *CHECKPOINTS, "--resume"))
    assert resumed.returncode in (0, 1), resumed.stderr[-2000:]
    assert '"key": "trainclock_resumed"' in next(tmp_path.glob("results/relaid/gpt3-tiny/result_0.txt")).read_text()
    assert losses(tmp_path) == pytest.approx(reference_losses, rel=2e-4, abs=2e-4)
    assert [tokens for tokens, _ in evals(tmp_path)] == [tokens for tokens, _ in reference_evals]


def test_resume_without_a_checkpoint_says_so(corpus_dir, tmp_path):
    proc = run(tiny_args(corpus_dir, tmp_path, "--resume"))
    assert proc.returncode == 2 and "nothing to resume" in proc.stderr


def test_a_checkpoint_of_another_run_is_refused(corpus_dir, tmp_path):
    victim = start(tiny_args(corpus_dir, tmp_path, *CHECKPOINTS))
    wait_for(lambda: checkpoints(tmp_path, "step_*/trainclock.json"))
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    other_seed = [a if a != "5" else "6" for a in tiny_args(corpus_dir, tmp_path, *CHECKPOINTS, "--resume")]
    proc = run(other_seed)
    assert proc.returncode == 2 and "--seed 6 differs from the run being resumed (--seed 5)" in proc.stderr


def _processes_writing_to(out: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(out).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    return found


def _worker_of_rank(root: int, rank: int) -> int | None:
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            env = (Path("/proc") / str(pid) / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and b"TORCHELASTIC_RESTART_COUNT=0" in env:
            return pid
        stack.extend(_children(pid))
    return None


def test_elastic_restart_after_a_rank_is_killed(uninterrupted, corpus_dir, tmp_path):
    reference_losses, _ = uninterrupted
    launcher = start(tiny_args(corpus_dir, tmp_path, "--nproc", "2", "--max-restarts", "1", *CHECKPOINTS))
    wait_for(lambda: checkpoints(tmp_path, "step_*/trainclock.json"))
    rank1 = _worker_of_rank(launcher.pid, 1)
    assert rank1 is not None
    os.kill(rank1, signal.SIGKILL)  # the injected failure
    stdout, stderr = launcher.communicate(timeout=240)
    assert launcher.returncode in (0, 1), stderr[-2000:]
    assert "run " in stdout  # the summary of the finished run
    log = next(tmp_path.glob("results/*/gpt3-tiny/result_0.txt")).read_text()
    assert '"key": "trainclock_resumed"' in log and '"restart_count": 1' in log
    assert losses(tmp_path) == pytest.approx(reference_losses, rel=2e-4, abs=2e-4)
