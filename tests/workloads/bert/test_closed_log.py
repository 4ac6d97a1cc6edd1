"""bert-large: BERT-Large's parameter count on the meta device, and the log of a short run of the
full config (its hyperparameters, keys, cadence and target) passing the official closed bert
rules, trained as a reduced-width copy (the 336M model is too slow here) on a few instances."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.workloads.helpers import closed_rule_failures, header_of, run_reduced_full_config
from trainclock.errors import UsageError
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.bert import WORKLOAD
from trainclock.workloads.bert.data.instances import make_instances
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.metric import METRIC
from trainclock.workloads.bert.spec import BertShape, get_member, mlperf_eval_every


def test_bert_large_has_the_reference_shape_and_336m_parameters():
    spec = get_member("bert-large")
    with torch.device("meta"):
        model = build_model(spec.shape, spec.dropout)
    counted = sum(p.numel() for p in model.parameters())
    assert counted == spec.shape.parameter_count() == 336_226_108
    assert (spec.seq_len, spec.max_predictions, spec.eval_samples, spec.targets[METRIC]) == (512, 76, 10_000, 0.720)
    assert spec.eval_every_samples == mlperf_eval_every(448) == 150_000


def test_other_batches_take_the_rules_reference_hyperparameters():
    spec = get_member("bert-large").with_batch(8192)
    hyper = (spec.learning_rate, spec.training_steps, spec.warmup_steps, spec.start_warmup_step)
    assert hyper == (0.00288293, 600, 287, -76)
    assert spec.eval_every_samples == mlperf_eval_every(8192) == 225_000
    with pytest.raises(UsageError, match="reference hyperparameters"):
        get_member("bert-large").with_batch(100)


def official_format_folder(folder, train: int, evaluation: int):
    rng = np.random.default_rng(0)
    documents = [[list(rng.integers(5, 30522, size=rng.integers(8, 40))) for _ in range(60)] for _ in range(8)]
    np.savez(folder / "train.npz", **make_instances(documents, train, 512, 76, 30522, seed=1))
    np.savez(folder / "eval.npz", **make_instances(documents, evaluation, 512, 76, 30522, seed=2))
    return folder


@pytest.mark.slow
def test_full_config_log_passes_the_official_closed_bert_rules(tmp_path):
    # the rules' hyperparameters at their smallest reference batch (RCP 256), at a fraction of the width
    full = get_member("bert-large").with_batch(256)
    spec = replace(full, shape=BertShape(n_layer=1, hidden=16, n_head=1, intermediate=32, vocab_size=30522),
                   micro_batch_size=32)
    start = tmp_path / "phase1.pt"
    torch.save(build_model(spec.shape, 0.0).state_dict(), start)
    data = official_format_folder(tmp_path, train=2 * spec.global_batch_size, evaluation=32)
    settings = RunSettings(data=str(data), extra={"init_checkpoint": str(start)})
    assert spec.global_batch_size == 256
    log = run_reduced_full_config(WORKLOAD, spec, tmp_path / "out", settings, max_samples=spec.global_batch_size)
    # the only rule an aborted run breaks: the target was not reached
    assert closed_rule_failures(log) == ["Failed checks for eval_accuracy : (v['value'] >= 0.720) and v['value'] < 1.0"]
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_division"] == "closed" and header["opt_name"] == "lamb"
    assert header["opt_base_learning_rate"] == 0.00035 and header["opt_learning_rate_training_steps"] == 13700
    assert header["max_predictions_per_seq"] == 76 and header["max_sequence_length"] == 512
    assert next(e for e in events if e.key == "eval_accuracy").metadata["epoch_num"] == 256  # samples, as bert logs


def test_full_config_without_its_start_checkpoint_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.delenv("TRAINCLOCK_BERT_INIT_CHECKPOINT", raising=False)
    from trainclock.distributed.context import single_process

    with pytest.raises(UsageError, match="--init-checkpoint PATH"):
        WORKLOAD.build_job(get_member("bert-large"), single_process(), torch.device("cpu"), 1,
                           RunSettings(data=str(tmp_path)))
