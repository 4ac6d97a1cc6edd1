"""Every entry in the fixtures' READMEs (shared/mlperf-results, shared/mlperf-suite) gets its published
official score, to 6 decimals. The expected scores are read from the README tables: a new fixture
is tested by adding a row there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainclock.review.entry import VALID
from trainclock.review.tree import review_path

from .conftest import MISSING, SHARED_RESULTS, SHARED_SUITE
from .readme_tables import Row, official_rows


def _rows() -> list:
    params = []
    for root in (SHARED_RESULTS, SHARED_SUITE):
        readme = root / "README.md"
        if not readme.is_file():
            # collected as one test that skips, which CI turns into a failure (SERVICE_SKIPS)
            params.append(pytest.param(None, id=f"{root.name}-missing",
                                       marks=pytest.mark.skip(reason=f"{MISSING} {root.resolve()}")))
            continue
        params += [pytest.param(row, id=row.id) for row in official_rows(readme)]
    return params


ROWS = _rows()


def with_committed_scaling(row: Row, tmp_path: Path) -> Path:
    """The entry's folder with the scaling.json the README says was committed with it. Where the
    fixture lacks that file (shared/mlperf-suite's Dell unet3d: the MLCommons repository has
    {"scaling_factor":1.093162} there, provenance.csv lists no such file), a copy in `tmp_path`
    with it added, laid out as the tree (round, org, systems/) so the review reads the same context."""
    factor = row.committed_scaling
    scaling = row.folder / "scaling.json"
    if factor is None or scaling.exists():
        return row.folder
    root = row.readme.parent
    relative = row.folder.relative_to(root)
    org = root / relative.parts[0] / relative.parts[1]
    copy = tmp_path / relative
    shutil.copytree(row.folder, copy)
    shutil.copytree(org / "systems", tmp_path / relative.parts[0] / relative.parts[1] / "systems")
    (copy / "scaling.json").write_text(json.dumps({"scaling_factor": float(factor)}))
    return copy


@pytest.mark.parametrize("row", ROWS)
def test_each_readme_entry_scores_its_official_score(row: Row, tmp_path):
    (entry,) = review_path(with_committed_scaling(row, tmp_path))
    assert entry.verdict == VALID and entry.ok, entry.reasons
    assert f"{entry.score_minutes:.6f}" == row.score
    assert entry.summarizer.score == entry.score_minutes  # what the summarizer prints for the entry
    if row.runs is not None:
        assert len(entry.runs) == row.runs
    if row.run_minutes:
        assert [f"{r.minutes:.6f}" for r in entry.runs] == list(row.run_minutes)
    if row.committed_scaling:
        # the notes give the factor as the file has it, perhaps shortened
        assert f"{entry.scaling_factor:.{len(row.committed_scaling) - 2}f}" == row.committed_scaling
    if row.olympic_mean:
        assert f"{entry.summarizer.olympic_mean:.6f}" == row.olympic_mean


def test_the_readme_tables_name_every_scored_fixture(shared_results, shared_suite):
    named = {row.folder for root in (shared_results, shared_suite) for row in official_rows(root / "README.md")}
    assert len(named) == 16
    # every complete entry of the suite has a row; mlperf-results' single logs are another table
    for entry in review_path(shared_suite):
        assert entry.context.folder in named


UNET3D = "v3.1/Dell/results/XE9680x8H100-SXM-80GB/unet3d"


def test_the_unet3d_fixture_as_it_is_shows_what_the_summarizer_prints(shared_suite):
    """Without the committee's scaling.json the summarizer prints the bare olympic mean and an RCP
    failure; trainclock shows that score and the failure, and gives no official score: a failed
    RCP check needs the committee's ruling. The normalization the RCP rules call for is the factor
    the committee committed (1.093162)."""
    folder = shared_suite / UNET3D
    if (folder / "scaling.json").exists():
        pytest.skip("the fixture now has its scaling.json: test_each_readme_entry_scores_its_official_score covers it")
    (entry,) = review_path(folder)
    assert entry.verdict == "invalid" and entry.score_minutes is None
    assert f"{entry.summarizer.score:.6f}" == "12.086309" and entry.summarizer.scaling_factor == 1.0
    assert entry.rcp.official == "Fail" and entry.rcp.official_message == "RCP found" and entry.rcp.batch_size == 56
    assert f"{entry.rcp.normalization:.6f}" == "1.093162"
    assert any("no scaling.json" in reason and "12.086309" in reason for reason in entry.reasons)
