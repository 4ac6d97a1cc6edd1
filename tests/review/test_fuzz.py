"""Fuzzing review and import with the mutations that found issue 11's crashes: deleted, duplicated
and swapped lines, flipped bytes, numbers turned into strings, NaN, Infinity, huge and negative
values, broken metadata, unicode escapes with lone surrogates, NUL bytes, in the logs and in the
system description. Every input gives a result or a one-line TrainclockError, within a time limit,
and what is printed can be written by a strict UTF-8 terminal."""

from __future__ import annotations

import json
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainclock.errors import TrainclockError
from trainclock.results.db import open_store, read
from trainclock.results.importer import import_paths
from trainclock.results.queries import list_entries, load_entry
from trainclock.results.render import print_entries, print_entry, print_import
from trainclock.review.render import print_review
from trainclock.review.tree import review_path

from .hostile import ORG, SYSTEM, copy_tree, strict_console, time_limit

CASES = 200  # about a minute on one core; each case reviews and imports a 3-log entry
SECONDS_PER_CASE = 30
ran = {"cases": 0}

ODD_VALUES = st.sampled_from([
    float("nan"), float("inf"), float("-inf"), 10**30, -(10**30), 10**400, -1, 0, 1e308, -1e-308, "", "12",
    "\ud800", "a\udfffb", "\x00", "nul\x00inside", "[/bold]", "[red]x", {"samples_count": "1"}, [], None, True,
    {"nested": [{"deep": float("nan")}]}, "é" * 50,
])
BROKEN_METADATA = st.sampled_from([
    None, [], "metadata", 5, {"epoch_num": "1"}, {"samples_count": 10**30}, {"samples_count": float("nan")},
    {"status": "[/]"}, {"status": "\ud800"}, {"metric": "\udc00"}, {"step_num": -5}, {"\ud800": 1},
])
# (action, where, where else, payload)
LOG_EDIT = st.one_of(
    st.tuples(st.sampled_from(["delete", "duplicate", "swap"]), st.integers(0, 10**6), st.integers(0, 10**6),
              st.none()),
    st.tuples(st.just("flip"), st.integers(0, 10**7), st.integers(0, 255), st.none()),
    st.tuples(st.just("nul"), st.integers(0, 10**7), st.integers(0, 0), st.none()),
    st.tuples(st.just("stringify"), st.integers(0, 10**6), st.integers(0, 0), st.none()),
    st.tuples(st.sampled_from(["value", "time_ms", "key"]), st.integers(0, 10**6), st.integers(0, 0), ODD_VALUES),
    st.tuples(st.just("metadata"), st.integers(0, 10**6), st.integers(0, 0), BROKEN_METADATA),
    st.tuples(st.just("escape"), st.integers(0, 10**6), st.integers(0, 0),
              st.sampled_from(["\\ud800", "\\udfff", "\\ud83d\\ude00", "\\u0000", "\\uffff", "\\ud800\\ud800"])),
)
SYSTEM_EDIT = st.tuples(st.sampled_from(["number_of_nodes", "accelerators_per_node", "submitter", "status",
                                         "accelerator_model_name"]), ODD_VALUES | st.sampled_from(
    ["99999999999999999999999", "-3", "1e999", "NaN", "2.5"]))


def edit_log(lines: list[bytes], edit) -> list[bytes]:
    action, i, j, payload = edit
    if not lines:
        return lines
    i, j = i % len(lines), j % len(lines)
    if action == "delete":
        del lines[i]
    elif action == "duplicate":
        lines.insert(j, lines[i])
    elif action == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    elif action in ("flip", "nul"):
        line = bytearray(lines[i])
        if line:
            line[(edit[1] // len(lines)) % len(line)] = 0 if action == "nul" else j % 256
        lines[i] = bytes(line)
    elif action == "escape":
        lines[i] = lines[i].replace(b'": "', f'": "{payload}'.encode(), 1)
    else:
        prefix, marker, record = lines[i].partition(b":::MLLOG ")
        try:
            parsed = json.loads(record)
        except ValueError:
            return lines
        if not marker or not isinstance(parsed, dict):
            return lines
        if action == "stringify":
            parsed = {k: str(v) if isinstance(v, int | float) else v for k, v in parsed.items()}
            if isinstance(parsed.get("metadata"), dict):
                parsed["metadata"] = {k: str(v) if isinstance(v, int | float) else v for k, v in parsed["metadata"].items()}
        else:
            parsed[action] = payload
        lines[i] = prefix + marker + json.dumps(parsed).encode("utf-8", "surrogatepass")
    return lines


def edit_system(text: str, edits) -> str:
    try:
        desc = json.loads(text)
    except ValueError:
        return text
    for name, value in edits:
        desc[name] = value
    return json.dumps(desc)


def printed(render) -> None:
    console, raw = strict_console()
    render(console)
    raw.getvalue().decode("utf-8")


@settings(max_examples=CASES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(log_edits=st.lists(st.tuples(st.integers(0, 2), LOG_EDIT), min_size=1, max_size=6),
       system_edits=st.lists(SYSTEM_EDIT, max_size=2), whole_file=st.sampled_from([None, b"", b"\x00\xff\xfe", b"\n\n"]))
def test_damaged_trees_give_a_result_or_one_line_error(shared_results, tmp_path, log_edits, system_edits, whole_file):
    ran["cases"] += 1
    root = tmp_path / uuid.uuid4().hex
    folder = copy_tree(shared_results, root)
    logs = [folder / f"result_{i}.txt" for i in range(3)]
    for which, edit in log_edits:
        logs[which].write_bytes(b"\n".join(edit_log(logs[which].read_bytes().split(b"\n"), edit)))
    if whole_file is not None:
        logs[0].write_bytes(whole_file)
    system_json = root / ORG / "systems" / f"{SYSTEM}.json"
    system_json.write_text(edit_system(system_json.read_text(), system_edits), encoding="utf-8", errors="surrogatepass")
    db = f"sqlite:///{root / 'results.db'}"
    with time_limit(SECONDS_PER_CASE):
        try:
            entries = review_path(folder)
        except TrainclockError as e:
            assert "\n" not in str(e)
        else:
            printed(lambda console: print_review(entries, console, verbose=True))
        try:
            report = import_paths([folder], db)
        except TrainclockError as e:
            assert "\n" not in str(e)
            return
        printed(lambda console: print_import(report, console))
        with open_store(db) as store:
            rows = read(store, list_entries, "listing")
            shown = [read(store, lambda s: load_entry(s, str(row.id)), "reading") for row in rows]
        printed(lambda console: print_entries(rows, console))
        for entry in shown:
            printed(lambda console: print_entry(entry, console, verbose=True))


def test_zz_report_fuzzed_cases():
    """Says how many cases the fuzz test ran (pytest -s shows it)."""
    print(f"fuzzed {ran['cases']} damaged trees through review and import")
