"""Fixtures of the review tests: the real MLPerf logs in shared/ and trainclock-written logs."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from trainclock.review.tree import review_path

from .trainclock_logs import write_tree

# hypothesis keeps caches in ./.hypothesis, which the repository does not ignore
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="trainclock-hypothesis-"))

# CI clones the repository with shared/ beside it
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
SHARED_RESULTS = SHARED / "mlperf-results"
SHARED_SUITE = SHARED / "mlperf-suite"  # the whole v3.1 suite: Dell's eight benchmarks, Intel's CPU entries
MISSING = "the MLPerf fixtures are not at"  # a skip CI turns into a failure (tests/conftest.py SERVICE_SKIPS)


@pytest.fixture(scope="session")
def shared_results() -> Path:
    if not SHARED_RESULTS.is_dir():
        pytest.skip(f"{MISSING} {SHARED_RESULTS.resolve()}")
    return SHARED_RESULTS.resolve()


@pytest.fixture(scope="session")
def shared_suite() -> Path:
    if not SHARED_SUITE.is_dir():
        pytest.skip(f"{MISSING} {SHARED_SUITE.resolve()}")
    return SHARED_SUITE.resolve()


@pytest.fixture(scope="session")
def shared_entries(shared_results):
    """The review of all of shared/mlperf-results, by '<round folder>/<org>/<system>/<benchmark>'."""
    return {_entry_id(e, shared_results): e for e in review_path(shared_results)}


def _entry_id(entry, root: Path) -> str:
    parts = entry.context.folder.relative_to(root).parts  # v3.1/NVIDIA/results/<system>/<benchmark>
    return "/".join((parts[0], parts[1], parts[3], parts[4]))


@pytest.fixture(scope="session")
def trainclock_tree(tmp_path_factory) -> Path:
    """A trainclock result tree of three passing gpt3-tiny runs, as `trainclock run` lays it out."""
    return write_tree(tmp_path_factory.mktemp("trainclock-tree"), minutes=[1.5, 1.2, 1.7])


@pytest.fixture
def copy_of(tmp_path, shared_results):
    """A writable copy of a folder of shared/mlperf-results (relative path), keeping its tree layout."""
    def copy(relative: str) -> Path:
        target = tmp_path / "copy" / relative
        shutil.copytree(shared_results / relative, target)
        return target
    return copy


FIXTURES = Path(__file__).resolve().parent / "fixtures"
LATER_ROUNDS = ("4.0", "4.1", "5.0", "5.1")  # fixtures/training_results_v<round>.tar.xz: published entries


@pytest.fixture(scope="session")
def later_rounds(tmp_path_factory) -> dict[str, Path]:
    """Round -> a read-only training_results_v<round> tree of a few published entries of that round
    (results/<system>/<benchmark>/ and systems/<system>.json, extracted from the MLCommons
    repositories as they are; kept compressed in the repository)."""
    root = tmp_path_factory.mktemp("later-rounds")
    trees = {}
    for round_ in LATER_ROUNDS:
        with tarfile.open(FIXTURES / f"training_results_v{round_}.tar.xz") as archive:
            archive.extractall(root, filter="data")
        trees[round_] = root / f"training_results_v{round_}"
    for path in root.rglob("*"):
        path.chmod(path.stat().st_mode & ~0o222)  # the review must never write into what it reads
    return trees
