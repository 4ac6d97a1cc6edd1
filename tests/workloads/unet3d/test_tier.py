"""unet3d-tiny end to end through `trainclock run`, on the tier's generated volumes in the real data
home (where `trainclock data prepare` caches them): it reaches its mean DICE target, its log passes
the official common rules and counts samples as the unet3d logs do, 2 processes train the same
curve as 1, a run killed with -9 resumes, the planner predicts it, and bad input is one line."""

from __future__ import annotations

import numpy as np
import pytest

from tests.workloads.helpers import (ROOT, assert_refuses_layouts_beyond_data_parallel,
                                     assert_resumes_to_its_sample_limit, assert_same_loss_curve,
                                     assert_tier_met_its_target, checked_open_log, error_line, evaluations, losses,
                                     one_and_two_processes, prepared_fixture, tier_run_fixture)
from trainclock.workloads.unet3d.spec import METRIC, get_member

MEMBER = "unet3d-tiny"

prepared = prepared_fixture(MEMBER)  # untimed: generated NIfTI cases preprocessed to .npy, cached
tiny_run = tier_run_fixture(MEMBER, "--seed", "11", "--no-progress")


@pytest.mark.slow
def test_unet3d_tiny_reaches_its_mean_dice_target(tiny_run):
    out = assert_tier_met_its_target(tiny_run, MEMBER, "mean DICE", get_member(MEMBER).targets[METRIC])
    steps = losses(out, MEMBER)
    evals = evaluations(out, MEMBER)
    assert np.mean(steps[-5:]) < np.mean(steps[:5])
    # a real segmentation, not the trivial one: both classes found (kidney alone scores at most 0.5)
    assert evals[-1]["kidney DICE"] > 0.5 and evals[-1]["tumour DICE"] > 0.1


@pytest.mark.slow
def test_unet3d_tiny_log_passes_the_official_common_rules_and_counts_samples(tiny_run):
    out, _ = tiny_run
    log = checked_open_log(out, MEMBER, "unet3d")
    header = log.header
    assert header["opt_name"] == "sgd" and header["training_input_shape"] == [32, 32, 32]
    assert header["validation_overlap"] == 0.5 and header["oversampling"] == 0.4
    spec = get_member(MEMBER)
    assert header["eval_samples"] == len(spec.eval_cases) == 6
    first = log.first("eval_accuracy")
    assert first.metadata["epoch_num"] == spec.eval_every_samples  # progress in samples, as the unet3d logs


@pytest.mark.slow
def test_two_processes_train_the_same_curve_as_one(prepared, tmp_path):
    one, two = one_and_two_processes(MEMBER, tmp_path, "--seed", "4", "--max-samples", "16", "--precision", "fp32",
                                     "--no-progress")
    assert_same_loss_curve(MEMBER, one, two, steps=4)
    first, second = evaluations(one, MEMBER), evaluations(two, MEMBER)
    assert len(first) == len(second) == 1  # the end-of-run evaluation, over the whole set in both
    # the weights agree to float rounding (DDP sums gradients in another order); the argmax of a barely
    # trained network can flip on a few near-tied voxels, so the Dice agrees to a few voxels' worth
    assert second[0] == pytest.approx(first[0], abs=2e-3)


@pytest.mark.slow
def test_resume_after_kill_9_continues_the_run(prepared, tmp_path):
    assert_resumes_to_its_sample_limit(tmp_path, MEMBER, checkpoint_every=4, max_samples=48)


def test_planner_predicts_the_full_size_from_the_rules_convergence_points(cli):
    code, out, err = cli("plan", "unet3d", "--accelerator", "h100-sxm", "--count", "8", "--gbs", "56")
    assert code == 0, out[-2000:] + err[-2000:]
    assert "unet3d-kits19" in out and "time-to-train" in out


def test_cost_model_describes_the_network_in_the_planners_terms():
    from trainclock.workloads.unet3d.cost import cost_model

    full = cost_model("unet3d-kits19")
    assert full.parameter_count == 31_190_243 and (full.layers, full.tensor_parallel_units) == (1, 1)
    # 3 x the convolutions of a 128^3 patch (455,187.5 FLOPs per voxel forward, as torch's FlopCounterMode counts)
    assert full.flops_per_sample.total == pytest.approx(3 * 455_187.5 * 128 ** 3)
    points = full.convergence(lambda: ROOT / "no-such-folder").points  # the rules package's RCPs
    assert dict(points)[56] == pytest.approx(386_400.0) and full.eval_samples == 42
    tier = cost_model(MEMBER)
    assert tier.sample_noun == "patches of 32^3 voxels" and tier.reference_batch_size == 4


def test_bad_input_is_one_line(cli, tmp_path):
    assert "--data FOLDER" in error_line(cli("run", "unet3d", "--out", tmp_path, "--no-progress"))
    (tmp_path / "npy").mkdir()
    (tmp_path / "npy/case_00001_x.npy").write_bytes(b"not an array")
    refused = cli("run", MEMBER, "--data", tmp_path / "npy", "--out", tmp_path, "--no-progress")
    assert "case_00001_y.npy is missing" in error_line(refused)


def test_layouts_the_network_cannot_take_are_refused():
    from trainclock.workloads.unet3d import WORKLOAD

    assert_refuses_layouts_beyond_data_parallel(WORKLOAD, MEMBER)
