"""Helpers of the hostile-input tests: a small real result tree to damage, a time limit per case
(a hang is a failure, not a stuck CI job), and a terminal that encodes strictly as UTF-8 (a
StringIO would accept the lone surrogates a real terminal cannot write)."""

from __future__ import annotations

import contextlib
import io
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

ORG = "v3.1/Intel-HabanaLabs"
SYSTEM = "HLS-Gaudi2-N48-PT"
BENCHMARK_FOLDER = f"{ORG}/results/{SYSTEM}/gpt3"
SYSTEM_JSON = f"{ORG}/systems/{SYSTEM}.json"


def copy_tree(shared_results: Path, into: Path, system: str = SYSTEM) -> Path:
    """A copy of the Intel v3.1 gpt3 entry (3 logs and its system description) under `into`,
    its system named `system`; returns the benchmark folder."""
    folder = into / ORG / "results" / system / "gpt3"
    shutil.copytree(shared_results / BENCHMARK_FOLDER, folder)
    (into / ORG / "systems").mkdir(parents=True, exist_ok=True)
    shutil.copy(shared_results / SYSTEM_JSON, into / ORG / "systems" / f"{system}.json")
    return folder


class CaseTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fails the case with CaseTimeout after `seconds` (a hang, e.g. on a FIFO)."""
    def expire(signum, frame):
        raise CaseTimeout(f"no result after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def strict_console() -> tuple[Console, io.BytesIO]:
    """A console writing UTF-8 strictly, as a terminal does, and its bytes."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", write_through=True)
    return Console(file=stream, width=120, color_system=None, force_terminal=False), raw
