import pytest

from trainclock.errors import UsageError
from trainclock.workloads.gpt3.spec import get_member


def test_175b_uses_the_mlperf_hyperparameters():
    s = get_member("gpt3-175b")
    assert (s.adam_beta1, s.adam_beta2, s.adam_eps, s.gradient_clip_norm) == (0.9, 0.95, 1e-8, 1.0)
    assert s.quality[0].threshold == 2.69
    assert s.eval_every_samples == 24576
    assert (s.global_batch_size, s.learning_rate, s.end_learning_rate) == (1536, 2e-5, 2e-6)


def test_batch_scaling_reproduces_the_intel_v31_log_values():
    # shared/mlperf-results v3.1 Intel-HabanaLabs gpt3 logs: gbs 2048, warmup 199, decay 81450, checkpoint 3000
    s = get_member("gpt3-175b").with_batch(2048)
    assert (s.warmup_steps, s.decay_steps, s.init_checkpoint_step) == (199, 81450, 3000)


def test_unknown_member_names_the_choices():
    with pytest.raises(UsageError, match="gpt3-mini"):
        get_member("gpt3-huge")


def test_memory_estimate_of_175b_is_terabytes():
    assert get_member("gpt3-175b").training_memory_bytes() > 2.7e12
