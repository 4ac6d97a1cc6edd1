"""The verdict's rules as pure functions, and the one precedence rule that combines them."""

from __future__ import annotations

from types import SimpleNamespace

from trainclock.review.rcp import RcpCheck
from trainclock.review.verdict import (INCOMPLETE, INVALID, SCORE_WITHHELD, VALID, Finding, consistency_rule,
                                       count_rule, decide, rcp_rule)


def run(passed: bool = True, benchmark: str = "bert", workload: str | None = None):
    return SimpleNamespace(passed=passed, benchmark=benchmark, workload=workload, where="r:1",
                           why_not_counted=None if passed else "did not converge")


RULE = SimpleNamespace(runs=3, not_converged=1, benchmark="bert")


def test_the_first_finding_that_is_not_valid_decides():
    assert decide([Finding(), Finding(INCOMPLETE, ("few",)), Finding(INVALID, ("rcp",))]) == (INCOMPLETE, ("few", "rcp"))
    assert decide([Finding(INVALID, ("mixed",)), Finding(INCOMPLETE, ("few",))]) == (INVALID, ("mixed", "few"))
    assert decide([Finding(), Finding()]) == (VALID, ())


def test_reasons_that_hold_for_an_otherwise_valid_entry_only():
    remarks = Finding(VALID, if_valid_before=("1 run dropped",))
    withheld = Finding(INVALID, ("RCP fail",), ("withheld",))
    assert decide([Finding(), remarks, withheld]) == (INVALID, ("1 run dropped", "RCP fail", "withheld"))
    assert decide([Finding(INVALID, ("mixed",)), remarks, withheld]) == (INVALID, ("mixed", "RCP fail"))


def test_consistency_rule():
    assert consistency_rule([run(), run()]).verdict == VALID
    found = consistency_rule([run(), run(benchmark="gpt3")])
    assert found.verdict == INVALID and found.reasons == ("the runs name different benchmarks: bert, gpt3",)


def test_count_rule():
    assert count_rule([run()] * 2, RULE, None, "bert", "3.1").verdict == INCOMPLETE
    assert count_rule([run(), run(False), run(False)], RULE, 1.0, "bert", "3.1").verdict == INVALID
    assert count_rule([run()] * 3, RULE, None, "bert", "3.1").verdict == INVALID  # nothing left to average
    found = count_rule([run(), run(), run(), run(False)], RULE, 1.0, "bert", "3.1")
    assert found.verdict == VALID and found.reasons == () and len(found.if_valid_before) == 2


def test_rcp_rule_withholds_without_a_ruling_and_defers_to_one():
    failed = RcpCheck("fail", "too fast", binding=True)
    withheld = rcp_rule(failed, 1.0, None, 12.5)
    assert withheld.verdict == INVALID and withheld.if_valid_before[0].startswith(SCORE_WITHHELD)
    ruled = rcp_rule(failed, 1.1, "scaling.json", 12.5)
    assert ruled.verdict == VALID and "review committee's scaling.json" in ruled.reasons[1]
    assert rcp_rule(None, 1.0, None, None) == Finding()
