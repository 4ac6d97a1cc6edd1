"""The user's path: the README's commands, and the default corpus trained end to end."""

import subprocess
import sys
from pathlib import Path

import pytest

from trainclock.mllog.reader import read_events
from trainclock.workload import registry
from trainclock.workloads.gpt3.spec import get_member

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    lines = REPO.joinpath("README.md").read_text().splitlines()
    return [line.strip() for line in lines[:2]]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    install_and_run, install_and_test = readme_commands()
    assert "install" in install_and_run and "trainclock run gpt3-mini" in install_and_run
    assert "--test" in install_and_test and "pytest" in install_and_test
    assert install_and_test in REPO.joinpath(".ci/run").read_text().splitlines()


@pytest.mark.slow
def test_tiny_reaches_its_target_on_the_default_corpus(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINCLOCK_HOME")  # the real data home, where the install fetched the corpus
    cli = [sys.executable, "-m", "trainclock.cli"]
    subprocess.run([*cli, "data", "fetch"], check=True, capture_output=True)
    proc = subprocess.run([*cli, "run", "gpt3-tiny", "--seed", "11", "--out", str(tmp_path), "--no-progress"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "run success" in proc.stdout and "time-to-train" in proc.stdout
    log = next(tmp_path.glob("results/*/gpt3-tiny/result_0.txt"))
    events, problems = read_events(log)
    assert not problems
    assert min(e.value for e in events if e.key == "eval_accuracy") <= get_member("gpt3-tiny").quality[0].threshold
    assert any(e.key == "trainclock_workload" and e.value == "gpt3-tiny" for e in events)
    assert any(e.key == "trainclock_round" and e.value == registry.find("gpt3-tiny")[0].mlperf_round for e in events)
