"""trainclock's scores against the official result summarizer (mlperf_logging, installed), run on a
copy of every fixture tree: it deletes and rewrites scaling.json in the folders it reads."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
from pathlib import Path

import pytest

from trainclock.review.tree import review_path

from .readme_tables import official_rows
from .test_unet3d_variants import _snapshot

RULESETS = {"v3.0": "3.0.0", "v3.1": "3.1.0"}


def official_scores(root: Path) -> dict[Path, dict]:
    """The summarizer's detailed columns per benchmark folder under `root` (time_to_train, GBS,
    samples_to_converge, RCP, rcp_scaling_factor), as summarize_results computes them system by system."""
    from mlperf_logging.result_summarizer import result_summarizer

    found = {}
    logging.disable(logging.CRITICAL)  # its RCP checker logs every record it reads
    try:
        for org in sorted(root.glob("v*/*")):
            for system in sorted((org / "results").iterdir()):
                try:
                    desc = result_summarizer._load_system_desc(str(org), system.name)
                except FileNotFoundError:
                    continue  # the summarizer skips a system without a description; so does this test
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    _, detailed = result_summarizer._compute_strong_scaling_scores(
                        desc, str(system), "training", RULESETS[org.parent.name], desc["division"])
                for benchmark in sorted(p.name for p in system.iterdir()):
                    found[system / benchmark] = {key.split(":", 1)[1]: value for key, value in detailed.items()
                                                 if key.split(":", 1)[0] == benchmark}
    finally:
        logging.disable(logging.NOTSET)
    return found


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy, in the summarizer: the mean of one run less two
def test_every_score_matches_the_official_summarizer(shared_results, shared_suite, tmp_path):
    copies = []
    for source in (shared_results, shared_suite):
        copy = tmp_path / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.csv", "rcps"))
        # the fixtures are read-only; the summarizer must be free to do what it does to a tree
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        copies.append(copy)
    # where a README names a committed scaling.json that the fixture lacks (Dell unet3d), add it,
    # as the MLCommons repository has it: the path where the summarizer's RCP check fails on a
    # committed factor is then checked too
    committed = {}
    for source, copy in zip((shared_results, shared_suite), copies):
        for row in official_rows(source / "README.md"):
            target = copy / row.folder.relative_to(source) / "scaling.json"
            if row.committed_scaling and not target.exists():
                target.write_text(json.dumps({"scaling_factor": float(row.committed_scaling)}))
    for copy in copies:
        for scaling in copy.rglob("scaling.json"):
            committed[scaling.parent] = json.loads(scaling.read_text())["scaling_factor"]

    # trainclock first: the summarizer changes the copies
    ours = {}
    for copy in copies:
        before = _snapshot(copy)
        ours.update({e.context.folder: e for e in review_path(copy)})
        assert _snapshot(copy) == before
    official = {}
    for copy in copies:
        official.update(official_scores(copy))

    compared, removed = 0, 0
    for folder, entry in ours.items():
        if folder not in official:
            assert entry.score_minutes is None, f"{folder}: the summarizer skips it (no system description)"
            continue
        theirs = official[folder]
        score = theirs.get("time_to_train")
        view = entry.summarizer
        if folder in committed and not (folder / "scaling.json").exists():
            # the summarizer's own RCP check failed and deleted the committed scaling.json: its next
            # run would print the bare olympic mean; the published score, which it printed this run
            # (it scores before its RCP check), is the olympic mean times the committed factor
            assert entry.rcp.official != "Pass", folder
            removed += 1
            assert score == pytest.approx(view.olympic_mean * committed[folder], rel=1e-12), folder
        if score is None:
            assert view.score is None, folder
        else:
            assert view.score == pytest.approx(score, rel=1e-12) and f"{view.score:.6f}" == f"{score:.6f}", folder
            compared += 1
        assert view.scaling_factor == theirs["rcp_scaling_factor"], folder
        if "RCP" in theirs:
            assert entry.rcp.official == theirs["RCP"], (folder, entry.rcp)
        if "GBS" in theirs:
            assert entry.rcp.batch_size == theirs["GBS"], folder
        if len(entry.runs) >= 3:
            # the summarizer's column: mean of the sorted convergence points less one each end,
            # a non-converged run counted as 1e9 (even for unet3d, which drops 4 in the RCP test)
            points = sorted(1e9 if r.rcp_point is None else r.rcp_point for r in entry.runs)
            assert sum(points[1:-1]) / len(points[1:-1]) == pytest.approx(theirs["samples_to_converge"], rel=1e-12)
    assert compared == 16  # every README entry, scored by both
    assert removed >= 1  # Dell unet3d: the summarizer's RCP check fails and deletes the committee's file
