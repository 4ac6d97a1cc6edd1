"""`trainclock results list|show|compare|import` and their one-line errors."""

from __future__ import annotations

import sqlite3

import pytest

from tests.workloads.helpers import error_line
from trainclock.results.db import open_store, read
from trainclock.results.importer import import_entries, import_paths
from trainclock.results.queries import EntryFilter, list_entries

from .conftest import gpu_family_tree

COREWEAVE = "coreweave_hgxh100_n448_ngc23.04_pytorch"


@pytest.fixture
def stored(db_url, shared_reviews) -> str:
    """The database with all of shared/mlperf-results in it."""
    with open_store(db_url) as store:
        import_entries(store, shared_reviews)
    return db_url


def listed(url: str, **filters) -> list[str]:
    with open_store(url) as store:
        rows = read(store, lambda session: list_entries(session, EntryFilter(**filters)), "listing")
    return sorted(f"{row.system} {row.round}" for row in rows)


GAUDI = ["HLS-Gaudi2-N48-PT 3.0", "HLS-Gaudi2-N48-PT 3.1"]


@pytest.mark.parametrize("filters, expected", [
    ({}, [*GAUDI, "XE9680x8H100-SXM-80GB 3.1", f"{COREWEAVE} 3.0", "cloud-tpu-v5e-4096-PAX 3.1",
          "eos_n64_ngc23.09_nemo 3.1", "eos_n8_ngc23.04_pytorch 3.1", "eos_ngc23.04_pytorch 3.1"]),
    ({"benchmark": "gpt3"}, [*GAUDI, f"{COREWEAVE} 3.0", "cloud-tpu-v5e-4096-PAX 3.1", "eos_n64_ngc23.09_nemo 3.1"]),
    ({"round": "3.0"}, [GAUDI[0], f"{COREWEAVE} 3.0"]),
    ({"round": "v3.1", "benchmark": "bert"}, ["eos_n8_ngc23.04_pytorch 3.1", "eos_ngc23.04_pytorch 3.1"]),
    ({"accelerator": "GAUDI2"}, GAUDI),
    ({"accelerator": "h100", "benchmark": "gpt3"}, [f"{COREWEAVE} 3.0", "eos_n64_ngc23.09_nemo 3.1"]),
    ({"accelerator": "cpu"}, []),
    ({"availability": "cloud"}, [f"{COREWEAVE} 3.0", "cloud-tpu-v5e-4096-PAX 3.1"]),
    ({"availability": "onprem", "benchmark": "gpt3"}, [*GAUDI, "eos_n64_ngc23.09_nemo 3.1"]),
])
def test_list_filters(stored, filters, expected):
    assert listed(stored, **filters) == sorted(expected)


@pytest.mark.parametrize("flags, shown, hidden", [
    (["--cloud"], ["Google", "NVIDIA+CoreWeave"], ["Gaudi2", "Dell", "eos"]),
    (["--onprem", "--round", "3.0"], ["Habana Gaudi2"], ["Intel Gaudi2", "CoreWeave", "Google"]),
    (["--accelerator", "gaudi", "--benchmark", "gpt3"], ["Habana Gaudi2", "Intel Gaudi2"], ["NVIDIA", "Google"]),
])
def test_list_command_flags(cli, stored, flags, shown, hidden):
    code, out, err = cli("results", "list", "--db", stored, *flags)
    assert code == 0, err
    assert all(text in out for text in shown) and not any(text in out for text in hidden)


def test_list_says_when_nothing_matches(cli, stored):
    code, out, _ = cli("results", "list", "--db", stored, "--benchmark", "resnet")
    assert code == 0 and "no stored entry matches" in out


def test_compare_shows_coreweave_next_to_the_gaudi2_entries(cli, stored):
    code, out, err = cli("results", "compare", "--db", stored)
    assert code == 0, err
    gpt3 = out[out.index("gpt3: score"):]
    gpt3 = gpt3[:gpt3.index("\n\n")]
    coreweave, gaudi_30, gaudi_31 = (next(line for line in gpt3.splitlines() if text in line)
                                     for text in ("NVIDIA+CoreWeave", "Habana Gaudi2", "Intel Gaudi2"))
    assert "3,584 × NVIDIA" in coreweave and "10.940" in coreweave and "cloud" in coreweave
    assert "384 × Habana Gaudi2" in gaudi_30 and "311.945" in gaudi_30 and "1.00×" in gaudi_30  # the slowest: baseline
    assert "153.581" in gaudi_31 and "2.03×" in gaudi_31
    # 311.944883 / 10.940417 = 28.51x; 1,211,105,280 tokens per run over its time, mean of 3, per H100: 514
    assert "28.51×" in coreweave and " 514 " in coreweave and "1,841,412" in coreweave


def test_compare_named_entries(cli, stored):
    code, out, err = cli("results", "compare", "--db", stored, "coreweave", "gaudi2", "--round", "3.0")
    assert code == 0, err
    assert "10.940" in out and "311.945" in out and "153.581" not in out and "bert" not in out


def test_throughput_per_accelerator_from_the_logs(stored, shared_reviews):
    from trainclock.results.compare import compare
    from trainclock.results.queries import run_stats

    with open_store(stored) as store:
        entries = read(store, lambda s: list_entries(s, EntryFilter(benchmark="gpt3", round="3.0")), "r")
        runs = read(store, lambda s: run_stats(s, [e.id for e in entries]), "r")
    (comparison,) = compare(entries, runs)
    rows = {row.entry.system: row for row in comparison.rows}
    for review in (r for r in shared_reviews if r.context.round == "3.0"):
        rates = [run.units_to_converge / (run.time_to_train_ms / 1000) for run in review.runs]
        row = rows[review.system]
        assert row.unit == "tokens" and row.throughput == pytest.approx(sum(rates) / len(rates), rel=1e-12)
        assert row.per_accelerator == pytest.approx(row.throughput / review.accelerators, rel=1e-12)
    assert rows[COREWEAVE].speedup == pytest.approx(311.944883 / 10.940417, rel=1e-6)
    assert comparison.scaling == []  # two different families


def test_scaling_efficiency_between_two_sizes_of_a_family(cli, db_url, tmp_path):
    small, large = [3.9, 4.0, 4.1], [1.2, 1.25, 1.3]
    import_paths([gpu_family_tree(tmp_path / "small", "gpu-box-8", 8, small),
                  gpu_family_tree(tmp_path / "large", "gpu-box-32", 32, large)], db_url)
    code, out, err = cli("results", "compare", "--db", db_url, "gpu-box")
    assert code == 0, err
    # time-to-train: T(8) = 4.0 and T(32) = 1.25 min (olympic means), so (4.0 / 1.25) / 4 = 80.0%;
    # throughput: every run converges at the same tokens, averaged as rates over all passed runs
    rate = lambda minutes: sum(1 / m for m in minutes) / len(minutes)  # noqa: E731
    throughput_efficiency = rate(large) / rate(small) / 4
    row = next(line for line in out.splitlines() if "trainclock Test GPU v3.1" in line)
    assert row.split()[4:] == ["8", "(#1)", "32", "(#2)", "4.00", "4.000", "1.250", "80.0%", f"{throughput_efficiency:.1%}"]
    assert "3.20×" in out and f"{throughput_efficiency:.1%}" != "80.0%"  # the two efficiencies do differ here


def test_show_an_entry(cli, stored):
    code, out, err = cli("results", "show", "--db", stored, "eos_n8")
    assert code == 0, err
    assert "0.898 min, valid" in out and "64 × NVIDIA H100-SXM5-80GB" in out
    assert "result_4.txt   aborted   fail       1.004" in out and "no eval_accuracy line meets the quality target" in out
    assert "eval curve" not in out
    code, out, _ = cli("results", "show", "--db", stored, "eos_n8", "-v")
    assert "eval curve (samples: value): 202,752: 0.3676" in out and "operating_system Ubuntu 20.04.5 LTS" in out


def test_import_command(cli, db_url, shared_results):
    code, out, err = cli("results", "import", "--db", db_url, shared_results / "v3.0")
    assert code == 0, err
    assert "imported 2 entries (2 new, 0 updated, 0 unchanged) and 6 logs (6 new runs, 0 already stored" in out
    code, out, _ = cli("results", "import", "--db", db_url, shared_results / "v3.0")
    assert "(0 new, 0 updated, 2 unchanged) and 6 logs (0 new runs, 6 already stored" in out


def test_the_default_database_is_in_the_data_directory(cli, data_home, shared_results, monkeypatch):
    monkeypatch.delenv("TRAINCLOCK_DB", raising=False)
    code, out, err = cli("results", "import", shared_results / "v3.0")
    assert code == 0, err
    assert (data_home / "results.db").is_file()
    other = data_home / "elsewhere.db"
    monkeypatch.setenv("TRAINCLOCK_DB", str(other))
    cli("results", "import", shared_results / "v3.0")
    assert other.is_file()


def one_line_error(cli, *args) -> str:
    result = cli(*args)
    assert result[1] == "", result[1]  # nothing half-done printed before the refusal
    return error_line(result)


@pytest.mark.parametrize("url, says", [
    ("nonsense://x", "must be SQLite or PostgreSQL, not 'nonsense'"),
    ("mysql://user@host/db", "must be SQLite or PostgreSQL, not 'mysql'"),
    ("postgresql://user:secret@host:port/db", "bad database URL"),
    ("postgresql://user:secret@127.0.0.1:1/db", "Connection refused; check that the server runs"),
])
def test_bad_database_urls(cli, url, says):
    for action in (["list"], ["import", "/nonexistent"]):
        line = one_line_error(cli, "results", *action, "--db", url)
        assert says in line and "secret" not in line


def test_a_store_in_a_folder_that_cannot_be_made(cli):
    """Import (a writer) tries to make the folder and says why it cannot; list (a reader) makes
    nothing and says there is no store there."""
    url = "/proc/no-such-folder/results.db"
    assert "cannot create the folder /proc/no-such-folder" in one_line_error(cli, "results", "import", "/nonexistent", "--db", url)
    assert "no trainclock results database at /proc/no-such-folder/results.db" in one_line_error(cli, "results", "list", "--db", url)


def test_a_file_that_is_no_results_database(cli, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    assert "is not a trainclock results database" in one_line_error(cli, "results", "list", "--db", other)
    (tmp_path / "garbage.db").write_bytes(b"not a database at all" * 100)
    assert "file is not a database" in one_line_error(cli, "results", "list", "--db", tmp_path / "garbage.db")


def test_selectors_and_paths_that_name_nothing(cli, stored, tmp_path):
    assert "no stored entry matches 'zzz'" in one_line_error(cli, "results", "show", "--db", stored, "zzz")
    assert "matches 4 entries" in one_line_error(cli, "results", "show", "--db", stored, "nvidia")
    assert "compare needs two or more" in one_line_error(cli, "results", "compare", "--db", stored, "coreweave")
    assert "with round=3.0" in one_line_error(cli, "results", "compare", "--db", stored, "google", "--round", "3.0")
    assert "no such file or folder" in one_line_error(cli, "results", "import", "--db", stored, tmp_path / "none")
