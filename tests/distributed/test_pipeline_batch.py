"""How a pipeline run splits its batch and which schedule flags go together (no processes)."""

import pytest

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.distributed.pipeline import check_microbatches, pipeline_micro_batch
from trainclock.workload.batch_plan import micro_batch


@pytest.mark.parametrize("per_rank, pp, schedule, micro", [
    (16, 2, "1f1b", 8),  # 2 micro-batches: the fewest that fill 2 stages
    (32, 4, "gpipe", 8),
    (5, 2, "1f1b", 1),  # 5 is prime: 5 micro-batches of 1
    (10, 4, "interleaved-1f1b", 2),  # 5 micro-batches: one round
    (12, 4, "interleaved-1f1b", 3),  # 4 in one round
    (1, 2, "gpipe", 1),  # too few sequences to fill the pipeline: the most there can be
])
def test_a_pipeline_gets_the_largest_micro_batch_that_fills_it(per_rank, pp, schedule, micro):
    assert pipeline_micro_batch(per_rank, pp, schedule) == micro


def test_the_schedules_limits_are_named():
    assert check_microbatches("gpipe", 1, 4) is None
    assert "at least pp = 4" in check_microbatches("1f1b", 3, 4)
    assert check_microbatches("interleaved-1f1b", 3, 4) is None  # one round of 3
    assert "rounds" in check_microbatches("interleaved-1f1b", 9, 4)  # 2 rounds of 9 do not divide


def test_an_explicit_micro_batch_is_kept_or_refused_with_the_fix():
    # gpt3-tiny: 32 sequences per step, micro-batch 32
    layout = Layout.for_world(2, pp=2)
    assert micro_batch(32, None, 32, layout, "sequence(s)") == 16
    assert micro_batch(32, None, 32, Layout.for_world(4, pp=2), "sequence(s)") == 8  # dp=2
    with pytest.raises(UsageError, match="gets 32 sequence\\(s\\) per step; pass a smaller --micro-batch"):
        micro_batch(32, 32, 32, layout, "sequence(s)")  # one micro-batch
    with pytest.raises(UsageError, match="got 1: each data-parallel rank gets 1 sequence.* a larger --gbs, or --pp-schedule gpipe"):
        micro_batch(2, None, 2, Layout.for_world(4, pp=2), "sequence(s)")  # 1 sequence per rank
    gpipe = Layout.for_world(2, pp=2, pp_schedule="gpipe")
    assert micro_batch(32, 32, 32, gpipe, "sequence(s)") == 32
    assert micro_batch(32, None, 32, Layout.for_world(2), "sequence(s)") == 32  # no pipeline: untouched


@pytest.mark.parametrize("flags, layout", [
    ({"pp": 2}, ("1f1b", 1)),
    ({"pp": 2, "vp": 3}, ("interleaved-1f1b", 3)),
    ({"pp": 2, "pp_schedule": "interleaved-1f1b"}, ("interleaved-1f1b", 2)),
    ({"pp": 2, "pp_schedule": "gpipe"}, ("gpipe", 1)),
    ({"pp": 2, "vp": 1}, ("1f1b", 1)),
])
def test_schedule_flags_resolve(flags, layout):
    resolved = Layout.for_world(2, **flags)
    assert (resolved.pp_schedule, resolved.vp) == layout


@pytest.mark.parametrize("flags, message", [
    ({"vp": 2}, "add --pp 2 or more"),
    ({"pp": 2, "pp_schedule": "gpipe", "vp": 2}, "does not go with the gpipe schedule"),
    ({"pp": 2, "pp_schedule": "interleaved-1f1b", "vp": 1}, "does not go with the interleaved-1f1b schedule"),
    ({"pp": 2, "pp_schedule": "zero-bubble"}, "unknown pipeline schedule"),
    ({"pp": 2, "vp": 0}, "--vp must be at least 1"),
])
def test_schedule_flags_that_do_not_go_together_are_refused(flags, message):
    with pytest.raises(UsageError, match=message):
        Layout.for_world(2, **flags)


def test_the_log_names_the_schedule():
    assert Layout.for_world(2).describe() == "dp=2 (ddp) tp=1 pp=1"
    assert Layout.for_world(4, pp=2, fsdp=True, vp=2).describe() == "dp=2 (fsdp) tp=1 pp=2 (interleaved-1f1b, vp=2)"
