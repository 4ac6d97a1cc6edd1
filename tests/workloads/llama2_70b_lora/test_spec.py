"""The full size's hyperparameters are the reference's and its round's rules' (spec.py cites each)."""

from __future__ import annotations

import pytest

from trainclock.errors import UsageError
from trainclock.workloads.llama2_70b_lora.optim import LoraAdamW
from trainclock.workloads.llama2_70b_lora.spec import METRIC, MLPERF_ROUND, get_member, mlperf_eval_cadence


def test_full_size_hyperparameters_are_the_reference_run():
    spec = get_member("llama2_70b_lora-70b")
    assert MLPERF_ROUND == "6.1" and spec.targets[METRIC] == 0.925 and spec.target_source.startswith("mlperf")
    assert (spec.global_batch_size, spec.learning_rate, spec.training_steps, spec.warmup_steps) == (8, 4e-4, 1024, 0)
    assert (spec.weight_decay, spec.gradient_clip_norm, spec.eval_sequences, spec.max_samples) == (1e-4, 0.3, 173, 8192)
    optimizer = LoraAdamW(spec)
    # Trainer's cosine without warmup: the base rate at step 0, half at the middle, 0 at max_steps
    assert optimizer.lr_at(0) == 4e-4 and optimizer.lr_at(512) == pytest.approx(2e-4) and optimizer.lr_at(1024) == 0.0
    keys = optimizer.log_keys()
    assert keys["opt_learning_rate_training_steps"] == 1024 and keys["opt_adamw_weight_decay"] == 1e-4


def test_eval_cadence_follows_the_rules_formula():
    # every 384 sequences in whole steps; the first FLOOR(0.125 x GBS + 2) evaluations skipped
    assert mlperf_eval_cadence(8) == (384, 4 * 384)
    assert mlperf_eval_cadence(16) == (384, 5 * 384)
    assert mlperf_eval_cadence(100) == (400, 15 * 400)
    spec = get_member("llama2_70b_lora-70b")
    assert (spec.eval_every_samples, spec.eval_first_samples) == (384, 1536)


def test_another_batch_takes_the_nearest_rcp_hyperparameters():
    wide = get_member("llama2_70b_lora-70b").with_batch(128)
    assert (wide.learning_rate, wide.training_steps, wide.max_samples) == (1e-3, 1024, 1024 * 128)
    assert (wide.eval_every_samples, wide.eval_first_samples) == (384, 19 * 384)
    with pytest.raises(UsageError, match="positive"):
        wide.with_batch(0)


def test_unknown_member_is_one_line():
    with pytest.raises(UsageError, match="choose one of: llama2_70b_lora-tiny"):
        get_member("llama2_70b_lora-huge")
