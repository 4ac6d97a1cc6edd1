"""Damaged copies of real logs (cut off anywhere, bytes overwritten, lines shuffled) never crash
the review, and always get a clear verdict: a run passes, or fails with findings saying why."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from trainclock.review.entry import INCOMPLETE, INVALID, VALID, EntryContext, review_entry
from trainclock.review.render import print_review
from trainclock.review.run_review import review_log

BERT = "v3.1/NVIDIA/results/eos_n8_ngc23.04_pytorch/bert/result_8.txt"
GPT3 = "v3.1/Google/results/cloud-tpu-v5e-4096-PAX/gpt3/result_0.txt"  # prefixed lines, unsorted times
SD = "v3.1/Dell/results/XE9680x8H100-SXM-80GB/stable_diffusion/result_0.txt"

DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)),
                                             min_size=1, max_size=12)),
    st.tuples(st.just("shuffle"), st.randoms(use_true_random=False)),
)


def damage(data: bytes, how) -> bytes:
    kind, detail = how
    if kind == "cut":
        return data[:int(len(data) * detail)]
    if kind == "overwrite":
        data = bytearray(data)
        for where, new in detail:
            at = int(where * (len(data) - 1))
            data[at:at + len(new)] = new
        return bytes(data)
    lines = data.split(b"\n")
    detail.shuffle(lines)
    return b"\n".join(lines)


def assert_clear_verdict(path):
    run = review_log(path, "3.1")
    assert isinstance(run.passed, bool)
    if not run.passed:
        assert run.errors or run.time_to_train_ms is None
    for finding in run.findings:
        assert finding.message and finding.rule and finding.severity in ("error", "warning")
        assert finding.lineno is None or finding.lineno >= 1
    entry = review_entry(EntryContext(path.parent, "3.1", "option"), [run])
    assert entry.verdict in (VALID, INVALID, INCOMPLETE)
    print_review([entry], Console(file=io.StringIO(), width=100), verbose=True)
    return run


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from([BERT, GPT3, SD]), how=DAMAGE)
def test_damaged_logs_get_a_clear_verdict(shared_results, tmp_path, which, how):
    path = tmp_path / "result_0.txt"
    path.write_bytes(damage((shared_results / which).read_bytes(), how))
    assert_clear_verdict(path)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000) | st.text(max_size=400).map(lambda t: (":::MLLOG " + t).encode()))
def test_arbitrary_bytes_get_a_clear_verdict(tmp_path, data):
    path = tmp_path / "result_0.txt"
    path.write_bytes(data)
    assert not assert_clear_verdict(path).passed


def test_a_log_cut_before_run_stop_fails_on_the_missing_run_stop(shared_results, tmp_path):
    data = (shared_results / BERT).read_bytes()
    path = tmp_path / "result_0.txt"
    path.write_bytes(data[:data.rindex(b'"key": "run_stop"') - 60])  # and mid-line: a malformed last line
    run = assert_clear_verdict(path)
    assert run.time_to_train_ms is None and run.status == "unfinished"
    assert any(f.key == "run_stop" and "found 0" in f.message for f in run.errors)
    assert any(f.rule == "log format" and f.lineno == data.count(b"\n", 0, len(path.read_bytes())) + 1 for f in run.errors)
