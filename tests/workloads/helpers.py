"""`trainclock` as a real process, for the workloads' end-to-end tests: one way to start it, read
what a run wrote, and kill a run at its first checkpoint; and the pieces every benchmark's tier
tests share (a module's prepared data and tier run, the log's common checks, 1 process against 2,
resume after kill -9, a reduced full config's closed log), so a test_tier.py writes only its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from trainclock.mllog.reader import Event
    from trainclock.workload.base import RunSettings, RunSpec, Workload

ROOT = Path(__file__).resolve().parents[2]
TOY = {"TRAINCLOCK_WORKLOADS": "tests.workloads.toyvision"}  # the test-only workload, as a plugin
TOY_MEMBER = "toyvision-tiny"


def environment(real_data: bool = True, **env: str) -> dict[str, str]:
    """One thread per process (tests run beside each other's processes), the repository importable.
    real_data drops the test's TRAINCLOCK_HOME: the tiers' generated data is cached in the real data
    home once for every test session, while results still go to the test's TRAINCLOCK_DB (conftest)."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **env}
    if real_data and "TRAINCLOCK_HOME" not in env:
        full.pop("TRAINCLOCK_HOME", None)
    return full


def trainclock(*argv: str, timeout: float = 600, real_data: bool = True, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainclock.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env=environment(real_data, **env), cwd=ROOT)


def start(*argv: str, real_data: bool = True, **env: str) -> subprocess.Popen:
    """A `trainclock` process in its own process group, so a kill reaches torchrun's workers too."""
    return subprocess.Popen([sys.executable, "-m", "trainclock.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=environment(real_data, **env), cwd=ROOT,
                            start_new_session=True)


def prepare_data(member: str) -> str:
    """`trainclock data prepare MEMBER` (untimed, cached in the real data home); its output."""
    done = trainclock("data", "prepare", member)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def records(out: Path, member: str, index: int = 0) -> list[dict]:
    metrics = next(out.glob(f"results/*/{member}/result_{index}.metrics.jsonl"))
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def log_path(out: Path, member: str, index: int = 0) -> Path:
    return next(out.glob(f"results/*/{member}/result_{index}.txt"))


def losses(out: Path, member: str) -> list[float]:
    return [r["loss"] for r in records(out, member) if "loss" in r]


def evaluations(out: Path, member: str, metric: str | None = None) -> list:
    """Each evaluation's metrics (a dict), or one metric's values."""
    evals = [r["eval"] for r in records(out, member) if "eval" in r]
    return [e[metric] for e in evals] if metric else evals


def kill_at_first_checkpoint(out: Path, member: str, *run_argv: str, timeout: float = 300,
                             real_data: bool = True, **env: str) -> None:
    """Starts `trainclock run MEMBER --out OUT RUN_ARGV`, waits for its first complete checkpoint
    (trainclock.json is written last) and kills the whole process group with SIGKILL."""
    victim = start("run", member, "--out", str(out), *run_argv, real_data=real_data, **env)
    deadline = time.monotonic() + timeout
    while not list(out.glob(f"checkpoints/*/{member}/result_0/step_*/trainclock.json")):
        assert time.monotonic() < deadline and victim.poll() is None, "no checkpoint before the run ended"
        time.sleep(0.01)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()


def toy(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`trainclock` with the test-only workload, in the test's own data home."""
    return trainclock(*argv, timeout=timeout, real_data=False, **TOY)


def toy_run(out: Path, *extra: str) -> list[str]:
    return ["run", TOY_MEMBER, "--out", str(out), "--no-progress", "--precision", "fp32", *extra]


def error_line(result: tuple[int, str, str]) -> str:
    """The one line a refused command prints (the `cli` fixture's result): exit code 2, no traceback."""
    code, _, err = result
    assert code == 2 and "Traceback" not in err, err[-3000:]
    (line,) = err.strip().splitlines()
    assert line.startswith("trainclock: error: "), line
    return line


# --- What every benchmark's tier tests do: prepare its data once, train the tier once per module,
# --- check the log, match 1 process with 2, resume after kill -9, and run the full config reduced.

def run_argv(member: str, out: Path, *args: str) -> list[str]:
    """`trainclock run MEMBER --out OUT ARGS...` as argv."""
    return ["run", member, "--out", str(out), *args]


def prepared_fixture(member: str, *expected: str, fetch: bool = False):
    """A module-scoped `prepared` fixture: `trainclock data prepare MEMBER` (untimed, cached in the
    real data home), its output holding each of `expected`; with fetch, `trainclock data fetch` first."""
    @pytest.fixture(scope="module", name="prepared")
    def prepared() -> str:
        if fetch:
            fetched = trainclock("data", "fetch")
            assert fetched.returncode == 0, fetched.stderr[-2000:]
        done = prepare_data(member)
        for text in expected:
            assert text in done
        return done
    return prepared


def tier_run_fixture(member: str, *args: str):
    """A module-scoped `tiny_run` fixture, after `prepared`: one whole `trainclock run MEMBER ARGS`
    into a folder of its own, (that folder, the finished process) for the module's tests to read."""
    @pytest.fixture(scope="module", name="tiny_run")
    def tiny_run(prepared: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
        out = tmp_path_factory.mktemp(member)
        return out, trainclock(*run_argv(member, out, *args))
    return tiny_run


def step_records(out: Path, member: str) -> list[dict]:
    """The training steps' records (those with a loss) of result 0."""
    return [r for r in records(out, member) if "loss" in r]


def assert_succeeded(proc: subprocess.CompletedProcess, *in_stdout: str) -> None:
    """A run that ended with exit code 0 and "run success", its output naming each of `in_stdout`."""
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "run success" in proc.stdout and all(text in proc.stdout for text in in_stdout)


def assert_met_first_at_last_evaluation(values: list[float], target: float, higher_is_better: bool = True) -> None:
    """The run stopped at its first evaluation to meet the target: the last meets it, none before did."""
    if higher_is_better:
        assert values[-1] >= target and all(v < target for v in values[:-1])
    else:
        assert values[-1] <= target and all(v > target for v in values[:-1])


def assert_tier_met_its_target(tiny_run: tuple[Path, subprocess.CompletedProcess], member: str, metric: str,
                                target: float, higher_is_better: bool = True, in_stdout: tuple[str, ...] = ()) -> Path:
    """The module's tier run succeeded (its output naming each of IN_STDOUT) and stopped at its first
    evaluation of METRIC to meet TARGET; the folder it wrote, for the benchmark's own checks."""
    out, proc = tiny_run
    assert_succeeded(proc, *in_stdout)
    assert_met_first_at_last_evaluation(evaluations(out, member, metric), target, higher_is_better)
    return out


def header_of(events: list[Event]) -> dict[str, Any]:
    """Each key's value (the last, where a key is logged more than once)."""
    return {e.key: e.value for e in events}


@dataclass(frozen=True)
class CheckedLog:
    """A run's log that passes the official common rules (`check(...) == []`) and reads back whole."""
    path: Path
    events: list[Event]

    @property
    def header(self) -> dict[str, Any]:
        return header_of(self.events)

    def first(self, key: str) -> Event:
        """The first event logged under key."""
        return next(e for e in self.events if e.key == key)


def checked_log(out: Path, member: str, index: int = 0) -> CheckedLog:
    """The log of result INDEX of MEMBER under OUT, asserted to pass the official common rules and to
    have no malformed line."""
    from tests.official_checker import check
    from trainclock.mllog.reader import read_events

    log = log_path(out, member, index)
    assert check(log) == []
    events, problems = read_events(log)
    assert not problems
    return CheckedLog(log, events)


def checked_open_log(out: Path, member: str, benchmark: str) -> CheckedLog:
    """checked_log, of a run that logs itself as BENCHMARK in the open division (as every tier does)."""
    log = checked_log(out, member)
    assert log.header["submission_benchmark"] == benchmark and log.header["submission_division"] == "open"
    return log


def one_and_two_processes(member: str, folder: Path, *args: str) -> tuple[Path, Path]:
    """`trainclock run MEMBER ARGS` on 1 process into FOLDER/one and on 2 (--nproc 2) into FOLDER/two,
    each asserted to end (exit code 0 or 1: at its target or its sample limit); the two folders."""
    one, two = folder / "one", folder / "two"
    first = trainclock(*run_argv(member, one, *args))
    second = trainclock(*run_argv(member, two, "--nproc", "2", *args))
    assert first.returncode in (0, 1) and second.returncode in (0, 1), \
        first.stderr[-2000:] + second.stdout[-2000:] + second.stderr[-3000:]
    return one, two


def assert_same_loss_curve(member: str, one: Path, two: Path, steps: int) -> None:
    """ONE trained STEPS steps and TWO the same curve, to float rounding (rel 1e-4, abs 1e-5)."""
    assert len(losses(one, member)) == steps
    assert losses(two, member) == pytest.approx(losses(one, member), rel=1e-4, abs=1e-5)


def kill_then_resume(out: Path, member: str, *args: str,
                     resume_args: tuple[str, ...] | None = None) -> subprocess.CompletedProcess:
    """`trainclock run MEMBER --out OUT ARGS` killed with -9 at its first checkpoint, then the same
    run (or RESUME_ARGS) with --resume, asserted to end (exit code 0 or 1); the resumed process."""
    kill_at_first_checkpoint(out, member, *args)
    resumed = trainclock(*run_argv(member, out, *(args if resume_args is None else resume_args), "--resume"))
    assert resumed.returncode in (0, 1), resumed.stdout[-2000:] + resumed.stderr[-3000:]
    return resumed


def assert_resumed_once(events: list[Event]) -> None:
    """A log that a resume continued: one run (its seed logged once) and the resume marked."""
    assert [e.key for e in events].count("seed") == 1 and any(e.key == "trainclock_resumed" for e in events)


def resumed_log_events(out: Path, member: str) -> list[Event]:
    """The events of the log of MEMBER under OUT, asserted to be one run that a resume continued."""
    from trainclock.mllog.reader import read_events

    events, _ = read_events(log_path(out, member))
    assert_resumed_once(events)
    return events


def assert_resumes_to_its_sample_limit(out: Path, member: str, checkpoint_every: int, max_samples: int) -> None:
    """A run to MAX_SAMPLES, checkpointed every CHECKPOINT_EVERY steps, killed with -9 at its first
    checkpoint and resumed: one run in the log, stopped once, its records up to MAX_SAMPLES."""
    kill_then_resume(out, member, "--no-progress", "--checkpoint-every", str(checkpoint_every),
                     "--max-samples", str(max_samples))
    events = resumed_log_events(out, member)
    assert [e.key for e in events].count("run_stop") == 1
    assert max(r["samples"] for r in records(out, member)) == max_samples


def assert_resumes_each_step_once(out: Path, member: str, *args: str, steps: int) -> None:
    """`trainclock run MEMBER ARGS` killed with -9 at its first checkpoint and resumed: one run in
    the log, whose records hold each of its STEPS steps once, in order."""
    kill_then_resume(out, member, *args)
    resumed_log_events(out, member)
    trained = [r["step"] for r in step_records(out, member)]
    assert trained == list(range(len(trained))) and len(trained) == steps


def assert_refuses_layouts_beyond_data_parallel(workload: Workload, member: str) -> None:
    """tp 2, pp 2 and FSDP are each refused: the network trains data parallel (DDP) only."""
    from trainclock.distributed.layout import Layout
    from trainclock.errors import UsageError

    for layout in (Layout(dp=1, tp=2), Layout(dp=1, pp=2), Layout(dp=2, fsdp=True)):
        with pytest.raises(UsageError, match="data parallel|DDP"):
            workload.check_layout(workload.specs.member(member), layout)


def run_reduced_full_config(workload: Workload, spec: RunSpec, out: Path, settings: RunSettings,
                            max_samples: int) -> Path:
    """The full config (a reduced copy: SPEC) run in this process on the CPU in fp32, seed 5, up to
    MAX_SAMPLES, asserted to stop there short of its target ("aborted"); its log."""
    import torch

    from trainclock.train.options import TrainOptions
    from trainclock.train.run import RunRequest, execute

    request = RunRequest(workload=workload, spec=spec, out=out, seed=5, progress=False, settings=settings,
                         options=TrainOptions(device=torch.device("cpu"), precision="fp32", max_samples=max_samples))
    result = execute(request)
    assert result.outcome.status == "aborted" and result.outcome.samples == max_samples
    return result.log_path


def closed_rule_failures(log: Path) -> list[str]:
    """The official round 3.1 closed rules (common, closed and the benchmark's) that LOG fails."""
    from tests.official_checker import check

    return check(log, "training_3.1.0/closed_common.yaml", follow=True)
