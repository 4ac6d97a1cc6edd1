"""llama2_70b_lora-70b: the log of a short run of the full config (its optimizer, keys, cadence,
target, 173 evaluation sequences, data in the official parquet layout, base weights from a local
--checkpoint) passing the official closed rules of its round. Llama 2 70B is beyond a CPU, so the run
is a reduced-width copy (2 layers of 32, sequences of 32 tokens) trained to its second evaluation,
1,920 samples in (the rules skip the first three at batch 8)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.official_checker import check
from tests.workloads.helpers import header_of, run_reduced_full_config
from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.llama2_70b_lora.checkpoint import save_base_weights
from trainclock.workloads.llama2_70b_lora.data import scrolls
from trainclock.workloads.llama2_70b_lora.model import IGNORE, Llama, LlamaShape
from trainclock.workloads.llama2_70b_lora.spec import FULL_SIZE, MLPERF_ROUND, get_member
from trainclock.workloads.llama2_70b_lora.workload import LlamaLoraWorkload

REDUCED = LlamaShape(n_layer=2, d_model=32, n_head=4, n_kv_head=2, d_ffn=48, vocab_size=64, context=32)
# keys the round's common rules ask of every run (v6.1: precision and parallelism disclosure) that
# trainclock's generic log header does not write yet: not the benchmark's to write
def parquet_folder(root, train: int, evals: int):
    rng = np.random.default_rng(0)
    for split, rows in (("train", train), ("val", evals)):
        inputs = rng.integers(0, REDUCED.vocab_size, (rows, REDUCED.context))
        labels = inputs.copy()
        labels[:, :20] = IGNORE  # a document of 20 tokens, a summary of 12
        scrolls.write_split(root, split, inputs, labels)
    return root


@pytest.mark.slow
def test_full_config_log_passes_the_official_closed_rules_of_its_round(tmp_path):
    spec = replace(get_member(FULL_SIZE), shape=REDUCED)
    torch.manual_seed(0)
    base = Llama(REDUCED)
    base.init_weights()
    save_base_weights(base, tmp_path / "model.safetensors")
    settings = RunSettings(data=str(parquet_folder(tmp_path / "govreport", train=64, evals=173)),
                           extra={"checkpoint": str(tmp_path)})
    log = run_reduced_full_config(LlamaLoraWorkload(), spec, tmp_path / "out", settings, max_samples=1920)
    failed = check(log, follow=True, round_=MLPERF_ROUND)
    # the only rule the run breaks: random tokens never reach the target
    assert failed == ["Failed checks for eval_accuracy : (v['value'] <= 0.925) and v['value'] > 0.0"]
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_benchmark"] == "llama2_70b_lora" and header["submission_division"] == "closed"
    assert header["trainclock_round"] == "6.1" and (header["lora_rank"], header["lora_alpha"]) == (16, 32)
    assert (header["train_samples"], header["eval_samples"], header["global_batch_size"]) == (64, 173, 8)
    counts = [e.metadata["samples_count"] for e in events if e.key == "eval_accuracy"]
    assert counts[:2] == [1536, 1920]  # the first three evaluations skipped, then every 384 sequences


def test_full_config_without_weights_or_data_is_one_clear_line():
    workload = LlamaLoraWorkload()
    with pytest.raises(UsageError, match="--checkpoint PATH"):
        workload.resolve(FULL_SIZE, RunSettings(data="/data"), Layout(), torch.device("cpu"))
    with pytest.raises(UsageError, match="--data FOLDER"):
        workload.resolve(FULL_SIZE, RunSettings(extra={"checkpoint": "/w"}), Layout(), torch.device("cpu"))
    spec = workload.resolve(FULL_SIZE, RunSettings(), Layout(), torch.device("meta"))  # a dry run needs neither
    assert spec.global_batch_size == 8
