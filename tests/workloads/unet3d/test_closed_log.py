"""unet3d-kits19: the rules' hyperparameters at each reference batch size, and the log of a short
run of the full config (its optimizer, keys, cadence, target, 168 train / 42 evaluation cases in
the reference's .npy format) passing the official closed unet3d rules. The 31.2M network at
128^3 trains about a sample a minute here, so the run is a reduced copy (3 levels of 2 filters,
16^3 patches, 16^3 volumes) trained for 3 steps (252 samples); train_samples is the training set's
size (168), logged once at init, as the rules want."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from tests.workloads.helpers import closed_rule_failures, header_of, run_reduced_full_config
from trainclock.errors import UsageError
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.unet3d import WORKLOAD
from trainclock.workloads.unet3d.spec import METRIC, get_member


def test_full_config_is_the_reference_and_takes_the_rules_hyperparameters():
    spec = get_member("unet3d-kits19")
    assert spec.filters == (32, 64, 128, 256, 320) and spec.parameter_count() == 31_190_243
    assert (spec.patch, spec.oversampling, spec.overlap, spec.targets[METRIC]) == (128, 0.4, 0.5, 0.908)
    assert (spec.global_batch_size, spec.learning_rate, spec.warmup_epochs) == (56, 2.0, 1000)
    assert (spec.eval_first_samples, spec.eval_every_samples, len(spec.eval_cases)) == (168_000, 3_360, 42)
    other = spec.with_batch(2)
    assert (other.learning_rate, other.warmup_epochs, other.initial_learning_rate) == (0.8, 200, 1e-4)
    with pytest.raises(UsageError, match="reference hyperparameters"):
        spec.with_batch(100)


def kits19_npy(folder, side: int = 16):
    """210 cases named as KiTS19's, each a bright cube (kidney) with a core (tumour)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(210):
        label = np.zeros((1, side, side, side), np.uint8)
        lo = rng.integers(1, side // 2)
        label[:, lo:lo + 6, lo:lo + 6, lo:lo + 6] = 1
        label[:, lo + 2:lo + 4, lo + 2:lo + 4, lo + 2:lo + 4] = 2
        image = (label.astype(np.float32) + rng.normal(0, 0.3, size=label.shape)).astype(np.float32)
        np.save(folder / f"case_{i:05d}_x.npy", image)  # plain np.save: 420 fsynced writes cost seconds
        np.save(folder / f"case_{i:05d}_y.npy", label)
    return folder


@pytest.mark.slow
def test_full_config_log_passes_the_official_closed_unet3d_rules(tmp_path):
    full = get_member("unet3d-kits19").with_batch(84)  # an RCP batch: 2 steps are one KiTS19 epoch
    spec = replace(full, filters=(2, 2, 2), patch=16, micro_batch_size=42, eval_batch=1)
    data = kits19_npy(tmp_path / "npy")
    log = run_reduced_full_config(WORKLOAD, spec, tmp_path / "out", RunSettings(data=str(data)), max_samples=252)
    # the only rule an aborted run breaks: the target was not reached
    assert closed_rule_failures(log) == ["Failed checks for eval_accuracy :  v['value'] >= 0.908"]
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_division"] == "closed" and header["submission_benchmark"] == "unet3d"
    assert header["opt_name"] == "sgd" and header["opt_base_learning_rate"] == 1.5
    assert header["opt_learning_rate_warmup_epochs"] == 1500 and header["opt_momentum"] == 0.9
    assert (header["train_samples"], header["eval_samples"], header["oversampling"]) == (168, 42, 0.4)
    assert [e.key for e in events].count("train_samples") == 1
    assert next(e for e in events if e.key == "eval_accuracy").metadata["epoch_num"] == 252  # samples, as unet3d logs


def test_full_config_without_data_is_one_clear_line():
    from trainclock.distributed.layout import Layout

    with pytest.raises(UsageError, match="--data FOLDER"):
        WORKLOAD.resolve("unet3d-kits19", RunSettings(), Layout(), torch.device("cpu"))
