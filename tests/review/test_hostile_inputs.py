"""Inputs that once crashed or hung the review (issue 11): a FIFO named like a log, lone
surrogate escapes, absurd node counts, huge logs of repeated failures, files with no MLLOG line."""

from __future__ import annotations

import json
import os

import pytest

from trainclock.errors import DataError
from trainclock.review.render import print_review
from trainclock.review.run_review import review_log
from trainclock.review.tree import review_path

from .hostile import SYSTEM, copy_tree, strict_console, time_limit


def test_a_fifo_named_like_a_log_is_skipped_not_waited_for(shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    os.mkfifo(folder / "result_9.txt")
    with time_limit(20):
        (entry,) = review_path(folder)
    assert [run.path.name for run in entry.runs] == ["result_0.txt", "result_1.txt", "result_2.txt"]


def test_a_fifo_given_to_review_log_is_refused_in_one_line(tmp_path):
    fifo = tmp_path / "result_0.txt"
    os.mkfifo(fifo)
    with time_limit(20), pytest.raises(DataError, match="not a regular file"):
        review_log(fifo, "3.1")


def test_a_fifo_as_system_description_is_refused_in_one_line(shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    system_json = tmp_path / "v3.1/Intel-HabanaLabs/systems" / f"{SYSTEM}.json"
    system_json.unlink()
    os.mkfifo(system_json)
    with time_limit(20), pytest.raises(DataError, match="not a regular file"):
        review_path(folder)


def test_lone_surrogates_in_a_log_and_a_system_description_print(shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    log = folder / "result_0.txt"
    text = log.read_text().replace('"value": "Intel-HabanaLabs"', '"value": "Intel\\ud800"', 1)
    log.write_text(text.replace('"key": "seed"', '"key": "seed\\udfff"', 1))
    system_json = tmp_path / "v3.1/Intel-HabanaLabs/systems" / f"{SYSTEM}.json"
    system_json.write_text(system_json.read_text().replace('"submitter": "', '"submitter": "\\ud83d', 1))
    entries = review_path(folder)
    console, raw = strict_console()
    print_review(entries, console, verbose=True)
    assert "\ufffd" in raw.getvalue().decode()
    assert entries[0].org.startswith("\ufffd")


@pytest.mark.parametrize("nodes", ["99999999999999999999999", -4, 1e300, "NaN", 2.5])
def test_an_implausible_node_count_is_a_reason_not_a_number(shared_results, tmp_path, nodes):
    folder = copy_tree(shared_results, tmp_path)
    system_json = tmp_path / "v3.1/Intel-HabanaLabs/systems" / f"{SYSTEM}.json"
    desc = json.loads(system_json.read_text())
    desc["number_of_nodes"] = nodes
    system_json.write_text(json.dumps(desc))
    (entry,) = review_path(folder)
    assert entry.accelerators is None
    assert any("number_of_nodes is" in reason for reason in entry.reasons)
    console, raw = strict_console()
    print_review([entry], console)
    assert "e+23" not in raw.getvalue().decode() and "number_of_nodes" in raw.getvalue().decode()


def test_a_log_failing_one_rule_on_every_line_keeps_a_bounded_list(shared_results, tmp_path):
    folder = copy_tree(shared_results, tmp_path)
    log = folder / "result_0.txt"
    lines = log.read_text().splitlines(keepends=True)
    stray = next(line for line in lines if '"key": "init_start"' in line)
    log.write_text("".join(lines) + stray * 5000)  # init_start after run_start, 5000 times
    run = review_log(log, "3.1")
    about = [f for f in run.errors if f.key == "init_start"]
    assert len(about) <= 100  # the first 50 and one that counts the rest
    assert sum(f.repeats for f in about) >= 5000 and run.error_count >= 5000
    assert any("more like the above" in f.message for f in about)


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 40, b"\x00" * 1000])
def test_a_file_without_mllog_lines_fails_review_saying_so(tmp_path, content):
    log = tmp_path / "result_0.txt"
    log.write_bytes(content)
    run = review_log(log, "3.1")
    assert not run.passed and run.events == 0
    assert any("no :::MLLOG lines" in f.message for f in run.errors)
