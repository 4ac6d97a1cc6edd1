"""trainclock's evaluator of the official rule files agrees with the MLCommons checker itself:
on every real log, and on logs with lines deleted, repeated, swapped, cut off or given other
values (hypothesis), whenever the official checker gets to a verdict at all."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlperf_logging.compliance_checker import mlp_compliance

from trainclock.mllog.reader import read_events
from trainclock.review import compliance


def official_passes(path: Path, round_: str) -> bool | None:
    """The official checker's verdict, None where it crashes (a rule raising, a missing rule file)."""
    checker = mlp_compliance.make_checker("training", f"{round_}.0", quiet=True, werror=False)
    mlp_compliance.enqueued_configs.clear()
    logging.disable(logging.CRITICAL)
    try:
        return checker.check_file(str(path), f"training_{round_}.0/common.yaml")
    except Exception:  # the official checker's own failures are not verdicts
        return None
    finally:
        logging.disable(logging.NOTSET)
        mlp_compliance.enqueued_configs.clear()


def our_official_chain_passes(path: Path, round_: str) -> bool:
    events, malformed = read_events(path)
    report = compliance.check(events, round_, malformed)
    return not [f for f in report.findings if f.severity == "error" and not f.rule.startswith("trainclock/")]


def test_same_verdict_as_the_official_checker_on_every_fixture(shared_results):
    logs = sorted(shared_results.glob("v3.*/*/results/*/*/result_*.txt"))
    assert len(logs) == 23
    verdicts = {}
    for log in logs:
        round_ = log.relative_to(shared_results).parts[0][1:]
        official = official_passes(log, round_)
        assert official is not None and our_official_chain_passes(log, round_) == official, log
        verdicts[log.name if official else str(log)] = official
    assert sum(not v for v in verdicts.values()) == 1  # bert result_4, which never converged


VALUES = st.sampled_from([None, 0, -1, 2.5, 1e-8, "", "closed", "open", True, [], {"x": 1}])
EDITS = st.lists(st.tuples(st.sampled_from(["delete", "repeat", "swap", "value", "truncate"]),
                           st.integers(0, 10_000), st.integers(0, 10_000), VALUES), min_size=1, max_size=4)


def mutate(lines: list[str], edits) -> list[str]:
    lines = list(lines)
    for action, i, j, value in edits:
        if not lines:
            break
        i, j = i % len(lines), j % len(lines)
        if action == "delete":
            del lines[i]
        elif action == "repeat":
            lines.insert(j, lines[i])
        elif action == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "truncate":
            lines = lines[:i]
        else:
            prefix, record = lines[i].split(":::MLLOG ", 1)
            lines[i] = f"{prefix}:::MLLOG {json.dumps({**json.loads(record), 'value': value})}"
    return lines


CASES = {
    "gpt3": ("v3.1/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3/result_0.txt", "3.1"),
    "gpt3 3.0": ("v3.0/Intel-HabanaLabs/results/HLS-Gaudi2-N48-PT/gpt3/result_1.txt", "3.0"),
    "stable diffusion": ("v3.1/Dell/results/XE9680x8H100-SXM-80GB/stable_diffusion/result_0.txt", "3.1"),
}


@pytest.mark.parametrize("case", CASES)
@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=EDITS)
def test_same_verdict_on_edited_logs(shared_results, tmp_path, case, edits):
    relative, round_ = CASES[case]
    lines = [line for line in (shared_results / relative).read_text().splitlines() if ":::MLLOG" in line]
    path = tmp_path / "result_0.txt"
    path.write_text("\n".join(mutate(lines, edits)) + "\n")
    official = official_passes(path, round_)
    if official is not None:
        assert our_official_chain_passes(path, round_) == official
