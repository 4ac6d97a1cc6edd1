"""Shared fixtures: an isolated data home, `trainclock` run in this process, and a small learnable
text corpus made on the spot."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from trainclock import cli as trainclock_cli

WORDS = {
    "subject": ["the king", "a fool", "my lord", "the queen", "this knight", "her brother", "the ghost", "our army"],
    "verb": ["speaks of", "weeps for", "marches to", "dreams of", "laughs at", "waits for", "remembers", "betrays"],
    "object": ["the crown", "a sword", "the castle", "his honour", "the sea", "a letter", "the night", "sweet love"],
    "tail": ["and all is well.", "yet none may know.", "with heavy heart.", "before the dawn.", "as fortune wills."],
}


def make_text(seed: int, n_lines: int) -> str:
    """Sentences from a tiny grammar: real structure to learn, so a model's loss must fall."""
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        speaker = rng.choice(["KING", "FOOL", "QUEEN", "GHOST"])
        sentence = " ".join(rng.choice(WORDS[k]) for k in ("subject", "verb", "object", "tail"))
        lines.append(f"{speaker}.\n{sentence[0].upper()}{sentence[1:]}\n" + ("\n" if i % 4 == 3 else ""))
    return "".join(lines)


# Skips that mean a service or fixture .ci/run provides is missing: under CI they are failures,
# so a broken install step cannot pass as a green run that tested less.
SERVICE_SKIPS = ("TRAINCLOCK_TEST_POSTGRES_URL is not set", "no running Slurm", "the MLPerf fixtures are not at",
                 "scripts/install_browser.sh")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped:
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if any(marker in reason for marker in SERVICE_SKIPS):
            report.outcome = "failed"
            report.longrepr = f"CI must run this test, but it was skipped: {reason}"


@pytest.fixture(scope="session", autouse=True)
def no_user_database(tmp_path_factory):
    """Results of runs started by module- and session-scoped fixtures (before any function's
    data_home) go to a store of the test session's own, never the user's database."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINCLOCK_DB", str(tmp_path_factory.mktemp("session-store") / "results.db"))
        yield


@pytest.fixture(autouse=True)
def data_home(tmp_path_factory, monkeypatch) -> Path:
    home = tmp_path_factory.mktemp("trainclock-home")
    monkeypatch.setenv("TRAINCLOCK_HOME", str(home))
    # named apart from the home: tests that read the real data home (the tiers' cached data) drop
    # TRAINCLOCK_HOME, and their runs must still store results here, never in the user's database
    monkeypatch.setenv("TRAINCLOCK_DB", str(home / "results.db"))
    return home


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as the end-to-end tests' processes get (tests/workloads/helpers.py): two
    threads on a 2-core machine that other processes keep busy spin-wait at the end of every op (a
    4-image RetinaNet step took 9.5 s with two threads at load 8, 0.1 s with one). A test that
    measures threads on purpose sets its own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def cli(capsys):
    """Runs `trainclock ARGS...` in this process (a subprocess pays seconds of imports first);
    returns (exit code, stdout, stderr)."""
    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = trainclock_cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err
    return run


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    """Three 'plays' of about 350 KB each."""
    folder = tmp_path_factory.mktemp("corpus")
    for i in range(3):
        (folder / f"play_{i}.txt").write_text(make_text(i, 7000))
    return folder
