"""rnnt-librispeech: the reference network and hyperparameters, and the log of a short run of the
full config (its optimizer, keys, cadence, target, 2,703 dev-clean utterances, data in the
reference's wav + JSON manifest format) passing the official closed rnnt rules. The 49M network on
LibriSpeech is days of CPU, so the run is a reduced copy (LSTMs of 8, a 30-piece vocabulary, 0.2 s
utterances all pointing at one wav) trained for 2 steps, then evaluated once on the 2,703."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import soundfile
import torch

from tests.workloads.helpers import closed_rule_failures, header_of, run_reduced_full_config
from trainclock.errors import UsageError
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.rnnt import WORKLOAD
from trainclock.workloads.rnnt.metric import METRIC
from trainclock.workloads.rnnt.spec import get_member

WORDS = "one two three four five six seven eight nine ten red green blue black white cat dog".split()


def test_full_config_is_the_reference():
    spec = get_member("rnnt-librispeech")
    m = spec.model
    assert spec.parameter_count() == 49_006_080 and (m.vocab, m.in_features, m.enc_hidden) == (1023, 240, 1024)
    assert (m.enc_pre_layers, m.enc_post_layers, m.stack_time, m.pred_hidden, m.pred_layers, m.joint_hidden) == \
        (2, 3, 2, 512, 2, 512)
    # the rules' reference hyperparameters (RCPs) at the batch size
    assert (spec.global_batch_size, spec.learning_rate, spec.warmup_epochs, spec.hold_epochs) == (1024, 0.007447, 3, 17)
    assert (spec.ema, spec.exp_gamma, spec.model.weights_init_scale) == (0.992, 0.9037, 0.5)
    assert (spec.max_symbols, spec.max_duration, spec.targets[METRIC], spec.eval_utterances) == (300, 16.7, 0.058, 2703)
    other = spec.with_batch(512)
    assert (other.learning_rate, other.beta2, other.model.weights_init_scale) == (0.0062, 0.9985, 0.45)
    with pytest.raises(UsageError, match="reference hyperparameters"):
        spec.with_batch(24)


def manifests(root, train: int = 48, evals: int = 2703):
    wav = root / "wav"
    wav.mkdir(parents=True)
    rng = np.random.default_rng(0)
    soundfile.write(str(wav / "a.wav"), rng.normal(0, 0.1, 3200).astype(np.float32), 16_000)

    def entry(i):
        text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(1 + i % 3))
        return {"transcript": text, "original_duration": 0.2, "files": [{"fname": "wav/a.wav", "speed": 1, "duration": 0.2}]}

    (root / "librispeech-train-clean-100-wav.json").write_text(json.dumps([entry(i) for i in range(train)]))
    (root / "librispeech-dev-clean-wav.json").write_text(json.dumps([entry(i) for i in range(evals)]))
    return root


@pytest.mark.slow
def test_full_config_log_passes_the_official_closed_rnnt_rules(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCLOCK_HOME", str(tmp_path / "home"))  # the sentencepiece model trained from the manifests
    full = replace(get_member("rnnt-librispeech"), global_batch_size=24)  # 2 steps: 48 utterances
    small = replace(full.model, vocab=30, enc_hidden=8, pred_hidden=8, joint_hidden=8, enc_pre_layers=1,
                    enc_post_layers=1, pred_layers=1, joint_chunk=24)
    spec = replace(full, model=small, micro_batch_size=24, eval_batch=256)
    data = manifests(tmp_path / "librispeech")
    log = run_reduced_full_config(WORKLOAD, spec, tmp_path / "out", RunSettings(data=str(data)), max_samples=48)
    # the only rule an aborted run breaks: the target was not reached
    assert closed_rule_failures(log) == ["Failed checks for eval_accuracy : v['value'] <= 0.058 and v['value'] > 0.0"]
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_division"] == "closed" and header["submission_benchmark"] == "rnnt"
    assert header["opt_name"] == "lamb" and header["opt_lamb_epsilon"] == 1e-9 and header["opt_weight_decay"] == 1e-3
    assert (header["data_speed_perturbaton_min"], header["data_speed_perturbaton_max"]) == (0.85, 1.15)
    assert (header["train_samples"], header["eval_samples"], header["model_eval_ema_factor"]) == (48, 2703, 0.992)
    assert next(e for e in events if e.key == "eval_accuracy").metadata["epoch_num"] == 1.0  # epochs, as rnnt logs


def test_full_config_without_data_is_one_clear_line():
    from trainclock.distributed.layout import Layout

    with pytest.raises(UsageError, match="--data FOLDER"):
        WORKLOAD.resolve("rnnt-librispeech", RunSettings(), Layout(), torch.device("cpu"))
