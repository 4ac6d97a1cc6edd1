"""The published entries of rounds 4.0 to 5.1 (tests/review/fixtures) in the results store: every
round imports, lists and compares by round, and each entry keeps the score the official
summarizer prints beside trainclock's, which differ only where trainclock withholds a score."""

from __future__ import annotations

import pytest

from review.conftest import later_rounds  # noqa: F401
from trainclock.results.db import open_store, read
from trainclock.results.importer import import_paths
from trainclock.results.queries import EntryFilter, list_entries
from trainclock.review.entry import SCORE_WITHHELD
from trainclock.review.tree import review_path

WITHHELD_41 = ("R760x2H100NVL-PCIe-94GB", "ssd")  # v4.1: RCP check failed, no scaling.json
WITHHELD_41_SUMMARIZER = "172.839311"


@pytest.fixture(scope="module")
def later_store(later_rounds, tmp_path_factory) -> str:  # noqa: F811
    url = f"sqlite:///{tmp_path_factory.mktemp('later-rounds-store') / 'results.db'}"
    for tree in later_rounds.values():
        import_paths([tree], url)
    return url


def _rows(url: str, **filters):
    with open_store(url) as store:
        return read(store, lambda session: list_entries(session, EntryFilter(**filters)), "listing")


def test_each_round_lists_its_own_entries_as_the_review_scores_them(later_store, later_rounds):  # noqa: F811
    for round_, tree in later_rounds.items():
        reviewed = {(e.system, e.name): (e.score_minutes, e.summarizer_score, e.verdict) for e in review_path(tree)}
        for name in (round_, f"v{round_}"):
            rows = _rows(later_store, round=name)
            assert {r.round for r in rows} == {round_}
            assert {(r.system, r.benchmark): (r.score_minutes, r.summarizer_minutes, r.verdict)
                    for r in rows} == reviewed


def test_a_withheld_score_is_stored_beside_the_summarizers(later_store):
    (row,) = [r for r in _rows(later_store, round="4.1") if (r.system, r.benchmark) == WITHHELD_41]
    assert row.verdict == "invalid" and row.score_minutes is None
    assert f"{row.summarizer_minutes:.6f}" == WITHHELD_41_SUMMARIZER
    scored = [r for r in _rows(later_store) if r.verdict == "valid"]
    assert scored and all(r.summarizer_minutes == r.score_minutes for r in scored)


def test_list_and_show_print_both_figures(cli, later_store):
    code, out, err = cli("results", "list", "--db", later_store, "--round", "4.1")
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if WITHHELD_41[0] in line]
    assert "172.839" in line and "invalid" in line
    assert "withholds the score of an entry whose RCP check failed without a scaling.json" in " ".join(out.split())
    assert "5.0" not in [word for line in out.splitlines() for word in line.split()[1:2]]  # the round column
    code, out, err = cli("results", "show", "--db", later_store, WITHHELD_41[0])
    assert code == 0, err
    text = " ".join(out.split())
    assert "the official summarizer prints 172.839 min" in text and SCORE_WITHHELD in text


def test_compare_by_round(cli, later_store):
    code, out, err = cli("results", "compare", "--db", later_store, "--round", "5.1")
    assert code == 0, err
    for benchmark in ("flux1", "llama31_8b", "llama31_405b", "retinanet", "rgat"):
        assert f"{benchmark}: score" in out
    assert "bert: score" not in out  # v5.1 has no bert; the v4.1 and v5.0 entries stay out


def test_every_later_benchmark_has_its_quality_metric_and_progress_unit(later_store):
    from trainclock.review.rounds import all_rounds

    rows = _rows(later_store)
    for row in rows:
        (target,) = all_rounds()[row.round].quality_target(row.benchmark).values() or [None]
        metrics = row.quality
        assert metrics, (row.round, row.benchmark)
        if target is not None and len(metrics) == 1:  # the rules' check says which way is better
            assert metrics[0].direction == ("lower" if "<=" in target.split("and")[0] else "higher"), row.benchmark
    # stable diffusion counts optimizer steps in 3.x and samples (samples_count) from 4.0
    assert {r.progress_unit for r in rows if r.benchmark == "stable_diffusion"} == {"samples"}


def test_compare_gives_stable_diffusions_throughput_in_samples(cli, later_store):
    code, out, err = cli("results", "compare", "--db", later_store, "--benchmark", "stable_diffusion", "--round", "4.0")
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if "D74H-7U" in line and "passed" in line]
    # 2,560,000 samples to converge in about 43.3 minutes, each run: 987 samples/s, not 512 (its batch) times that
    assert "987" in line.split()
