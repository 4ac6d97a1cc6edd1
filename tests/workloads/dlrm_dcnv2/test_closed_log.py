"""dlrm-criteo1tb: the reference's 26B-parameter shape counted on the meta device, and the log of
a short run of the full config (its Adagrad keys, batch, cadence, eval count and target) passing
the official closed dlrm_dcnv2 rules, trained as a copy with fewer table rows and narrower layers
(the 26B tables and 16M-parameter MLPs at batch 32,768 are too big and slow here) on tiny files in
the official multi-hot format, with the official bag sizes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tests.workloads.dlrm_dcnv2.files import write_days
from tests.workloads.helpers import closed_rule_failures, header_of, run_reduced_full_config
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.dlrm_dcnv2 import WORKLOAD
from trainclock.workloads.dlrm_dcnv2.model import build_model
from trainclock.workloads.dlrm_dcnv2.spec import CRITEO_MULTI_HOT, CRITEO_ROWS, METRIC, get_member


def test_full_size_has_the_reference_shape_and_26b_parameters():
    spec = get_member("dlrm-criteo1tb")
    with torch.device("meta"):
        model = build_model(spec.shape)
    tables = sum(p.numel() for n, p in model.named_parameters() if n.startswith("tables."))
    dense = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("tables."))
    assert tables == sum(CRITEO_ROWS) * 128 == spec.shape.embedding_parameters() == 26_135_627_264
    assert dense == spec.shape.dense_parameters() == 16_044_545  # bottom 171,392 + cross 10,627,200 + top 5,245,953
    assert (spec.global_batch_size, spec.learning_rate, spec.targets[METRIC]) == (65_536, 0.004, 0.80275)
    assert spec.eval_samples == 89_137_319 and spec.max_samples == 4_195_197_692 // 65_536 * 65_536
    assert spec.eval_every_samples == 3_200 * 65_536  # TOTAL_TRAINING_SAMPLES // (GBS * 20) steps
    assert [m.name for m in WORKLOAD.members()][-1] == "dlrm-criteo1tb" and WORKLOAD.full_size == "dlrm-criteo1tb"


def test_other_batches_take_the_rules_reference_learning_rate():
    spec = get_member("dlrm-criteo1tb")
    assert spec.with_batch(135_168).learning_rate == 0.0034
    from trainclock.errors import UsageError

    with pytest.raises(UsageError, match="RCPs"):
        spec.with_batch(1000)


@pytest.mark.slow
def test_full_config_log_passes_the_official_closed_dlrm_dcnv2_rules(tmp_path):
    full = get_member("dlrm-criteo1tb").with_batch(32_768)  # the rules' smallest reference batch
    shape = replace(full.shape, rows=tuple(min(r, 1000) for r in CRITEO_ROWS), dim=16, bottom=(32, 16),
                    top=(64, 32, 1), cross_rank=16)
    spec = replace(full, shape=shape, micro_batch_size=8192)
    assert shape.multi_hot == CRITEO_MULTI_HOT
    data = write_days(tmp_path / "criteo", 24, [1_425] * 23 + [64], CRITEO_MULTI_HOT)  # 32,775 train rows
    assert spec.global_batch_size == 32_768
    log = run_reduced_full_config(WORKLOAD, spec, tmp_path / "out", RunSettings(data=str(data)),
                                  max_samples=spec.global_batch_size)
    # the only rule an aborted run breaks: the target was not reached
    assert closed_rule_failures(log) == [
        "Failed checks for eval_accuracy : v['value'] >= 0.80275 and v['value'] <= 1.0"]
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_division"] == "closed" and header["opt_name"] == "adagrad"
    assert header["opt_adagrad_epsilon"] == 1e-8 and header["opt_base_learning_rate"] == 0.004
    assert header["eval_samples"] == 89_137_319 and header["trainclock_eval_samples_read"] == 32
    assert header["multi_hot_sizes"] == list(CRITEO_MULTI_HOT)
    first = next(e for e in events if e.key == "eval_accuracy")
    assert first.metadata["epoch_num"] == pytest.approx(32_768 / 4_195_197_692)  # a fraction of the epoch


def test_full_size_on_one_small_device_is_refused_in_one_line():
    from trainclock.distributed.layout import Layout
    from trainclock.errors import ResourceError

    # 26B fp32 table values with their Adagrad sums (8 bytes each) and the sparse gradient of a
    # batch's 14M looked-up ids
    with pytest.raises(ResourceError, match=r"needs about 202 GiB .* shard its tables over more processes"):
        WORKLOAD.resolve("dlrm-criteo1tb", RunSettings(data="anywhere"), Layout(), torch.device("cpu"))
    # sharded over 64 processes by the planner, the fullest holds 3.8M table rows (and all of the dense part)
    try:
        spec = WORKLOAD.resolve("dlrm-criteo1tb", RunSettings(data="anywhere"), Layout(dp=64), torch.device("cpu"))
        assert spec.embedding_sharding == "auto"
    except ResourceError as e:
        assert "needs about 4 GiB" in str(e)
