"""The planner at scale (issue 38): the layouts the submissions ran, read from NVIDIA's config files
into planner/model/published_layouts.toml, planned by default at their scale and said so; extrapolation
from small systems to at least 4x larger ones inside shared/; evaluation as work over the
replicas; the sanity line for the seeds' 10,752-GPU system."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from trainclock.commands import plan as plan_command
from trainclock.errors import DataError, UsageError
from trainclock.planner.calibration import published_scores
from trainclock.planner.model.hardware import load_catalogue
from trainclock.planner.model.parallel_plan import complete
from trainclock.planner.model.published_layouts import (parse_table, published_layout, published_layouts,
                                                        reference_figure)
from trainclock.planner.model.search import SearchResult
from trainclock.planner.model.step_time import Efficiency, eval_seconds, step_time
from trainclock.planner.model.workload_view import cost_model
from trainclock.planner.plan import Planner

SUITE = (Path(__file__).resolve().parents[2] / ".." / "shared" / "mlperf-suite").resolve()


def test_every_published_layout_names_its_config_file_and_runs_a_whole_batch():
    for key in ("gpt3", "bert", "resnet", "ssd", "maskrcnn", "rnnt", "unet3d", "dlrm_dcnv2", "stable_diffusion"):
        rows = published_layouts(key, "h100-sxm")
        assert rows, key
        for row in rows:
            # NVIDIA's files, or where NVIDIA ran no such scale its submitters' own
            submitter, benchmarks, bench, *_ = row.source.split("/")
            assert benchmarks in ("benchmarks", "benchmark") and bench == key, row.source
            assert submitter != "NVIDIA" or "config_DGXH100" in row.source
            assert row.source.rsplit("/", 1)[-1].startswith("config_") and row.source.endswith(".sh")
            assert row.commit and row.repository == "mlcommons/training_results_v3.1"
            tp, pp = row.layout.get("tp", 1), row.layout.get("pp", 1)
            dp = row.count // (tp * pp)
            assert row.global_batch_size % (dp * row.layout["micro_batch"]) == 0, row
    eos = published_layout("gpt3", "h100-sxm", 10752)
    # config_DGXH100_1344x8x8x4x8_mbs1.sh: MINIBS 8 over 10,752 / (4 x 8) = 336 replicas
    assert eos.global_batch_size == 2688 and eos.layout["tp"] == 4 and eos.layout["pp"] == 8 and eos.layout["vp"] == 12
    assert published_layout("gpt3", "h100-sxm", 10000) is None and published_layout("gpt3", "gaudi2", 10752) is None


def test_two_layouts_for_one_scale_of_an_accelerator_are_refused():
    row = ('[[layouts]]\nbenchmark = "maskrcnn"\naccelerator = "h100-pcie"\ncount = 8\nglobal_batch_size = 96\n'
           'layout = "tp=1,pp=1,mb=12,zero=0"\nsource = "{}/benchmarks/maskrcnn/implementations/pytorch/config_x.sh"\n')
    head = 'repository = "mlcommons/training_results_v3.1"\ncommit = "d06288b2bd675a9d88e0e6181f5bb5626b71ec19"\n'
    layouts, _ = parse_table(head + row.format("ASUSTeK"))
    assert layouts[0].source.startswith("ASUSTeK/") and layouts[0].layout["micro_batch"] == 12
    with pytest.raises(DataError, match=r"two layouts of maskrcnn on 8 x h100-pcie"):
        parse_table(head + row.format("ASUSTeK") + row.format("Lenovo"))


def test_mask_rcnn_entries_below_nvidias_scales_read_their_submitters_files():
    # SOLVER.IMS_PER_BATCH is the global batch, split evenly over the ranks (BATCHSIZE only names the run)
    four = published_layout("maskrcnn", "h100-sxm", 4)
    assert four.source == "Dell/benchmarks/maskrcnn/implementations/pytorch/config_XE8640x4H100.sh"
    assert (four.global_batch_size, four.layout["micro_batch"]) == (48, 12)
    for accelerator, count, batch, per_gpu, submitter in (
            ("h100-sxm-96gb", 4, 48, 12, "Lenovo"), ("h100-pcie", 4, 48, 12, "Quanta_Cloud_Technology"),
            ("h100-pcie", 8, 96, 12, "ASUSTeK"), ("l40", 8, 88, 11, "xFusion"), ("l40", 10, 110, 11, "xFusion"),
            ("l40s", 8, 88, 11, "xFusion")):
        row = published_layout("maskrcnn", accelerator, count)
        assert (row.global_batch_size, row.layout["micro_batch"]) == (batch, per_gpu), row
        assert row.source.startswith(f"{submitter}/") and "/maskrcnn/" in row.source
    # NVIDIA's own: 12 images per GPU on one node, 4 on eight
    assert published_layout("maskrcnn", "h100-sxm", 8).layout["micro_batch"] == 12
    assert published_layout("maskrcnn", "h100-sxm", 64).layout["micro_batch"] == 4
    # its optimizer all-reduces the gradients after the backward pass (no DistributedDataParallel)
    assert all(row.layout["overlap"] is False
               for a in ("h100-sxm", "h100-sxm-96gb", "h100-pcie", "l40", "l40s") for row in published_layouts("maskrcnn", a))


def test_dlrm_entries_below_nvidias_scales_and_on_pcie_read_their_submitters_files():
    # BATCHSIZE is DLRM's global batch: Quanta's 4 PCIe cards train the 8-card batch, 13,824 per card
    for accelerator, count, batch, per_gpu, submitter in (
            ("h100-sxm", 4, 32768, 8192, "Supermicro"), ("h100-pcie", 4, 55296, 13824, "Quanta_Cloud_Technology"),
            ("h100-pcie", 8, 55296, 6912, "ASUSTeK")):
        row = published_layout("dlrm_dcnv2", accelerator, count)
        assert (row.global_batch_size, row.layout["micro_batch"]) == (batch, per_gpu), row
        assert row.source.startswith(f"{submitter}/") and "/dlrm_dcnv2/" in row.source


def test_plan_uses_the_submissions_layout_at_its_scale_and_says_when_it_chose_one(mlperf_dir):
    planner = Planner(cost_model("gpt3"), load_catalogue(), mlperf_dir)
    h100 = planner.catalogue["h100-sxm"]
    calibrated = planner.calibrated(h100)
    at_eos, how = planner.plan(h100, 10752, calibrated, {})
    assert how == published_layout("gpt3", "h100-sxm", 10752)
    assert at_eos.global_batch_size == 2688 and at_eos.plan.short().startswith("tp4 pp8 dp336 vp12 mb1")
    searched, how = planner.plan(h100, 3584, calibrated, {})  # no v3.1 file at 3,584: the search decides
    assert isinstance(how, SearchResult) and how.ranked[0] is searched
    given, how = planner.plan(h100, 10752, calibrated, {}, 2688 * 2)  # --gbs: the file does not apply
    assert isinstance(how, SearchResult) and given.global_batch_size == 2688 * 2
    # a reduced member never takes the full size's layout
    assert Planner(cost_model("gpt3-mini"), load_catalogue(), mlperf_dir).published(h100, 10752) is None


def test_beyond_the_convergence_data_the_plan_extrapolates_the_progress_and_says_so(mlperf_dir):
    # 768 replicas of at least one sample: no batch inside the RCPs (2 to 84) runs, so the submission's
    # batch at this scale, with the progress to target extrapolated along the last two RCP points
    planner = Planner(cost_model("unet3d"), load_catalogue(), mlperf_dir)
    h100 = planner.catalogue["h100-sxm"]
    calibrated = planner.calibrated(h100)
    predicted, how = planner.plan(h100, 768, calibrated, {})
    assert how == published_layout("unet3d", "h100-sxm", 768) and predicted.global_batch_size == 768
    assert "extrapolated from global batch 84 to 768" in predicted.samples_source
    convergence = planner.convergence()
    (b0, u0), (b1, u1) = convergence.points[-2:]
    assert convergence.extended_to(768).units_needed(768) == pytest.approx(u1 + max(0, (u1 - u0) / (b1 - b0)) * (768 - b1))
    assert convergence.extended_to(b1) is convergence
    # without a submission at the scale: the smallest batch plain data parallelism runs there
    searched, how = planner.plan(h100, 384, calibrated, {})
    assert isinstance(how, SearchResult) and searched.global_batch_size == 384 and "extrapolated" in searched.samples_source
    # a batch the user gives outside the data is still refused, saying why
    with pytest.raises(UsageError, match=r"cover only global batch sizes 2 to 84"):
        planner.plan(h100, 768, calibrated, {}, 1536)


def test_plan_prints_the_seeds_figure_and_the_scaling_efficiency_beside_its_prediction(mlperf_dir, monkeypatch,
                                                                                       capsys):
    monkeypatch.setenv("COLUMNS", "250")
    parser = argparse.ArgumentParser(prog="trainclock")
    plan_command.register(parser.add_subparsers(required=True))
    args = parser.parse_args(["plan", "gpt3", "--accelerator", "h100-sxm", "--count", "10752",
                              "--mlperf-results", str(mlperf_dir)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    figure = reference_figure("gpt3", "h100-sxm", 10752)
    assert figure.minutes == 3.9 and figure.compare_count == 3584
    assert "as the submission at this scale ran it" in out and "config_DGXH100_1344x8x8x4x8_mbs1.sh" in out
    assert "sanity: published 3.9 min for this system" in out
    assert "predicted scaling 3,584 -> 10,752 x h100-sxm" in out and "time-to-train efficiency" in out


def test_evaluation_is_work_over_the_replicas_plus_a_fixed_cost():
    cost = cost_model("unet3d")
    h100 = load_catalogue()["h100-sxm"]
    efficiency = Efficiency(0.2, eval_overhead_s=0.5, eval_compute=0.004)
    eight, many = (complete(published_scores.template(h100), {"tp": 1, "pp": 1, "micro_batch": 1, "zero": 0}, n) for n in (8, 72))
    work_8 = eval_seconds(cost, eight, h100, efficiency) - 0.5
    work_72 = eval_seconds(cost, many, h100, efficiency) - 0.5
    # the validation set's samples over 8 and over 72 replicas, whole samples per replica
    assert work_72 / work_8 == pytest.approx(-(-cost.eval_samples // 72) / -(-cost.eval_samples // 8), rel=0.05)


def test_a_fixed_cost_per_step_is_paid_once_per_step_whatever_its_size():
    cost = cost_model("resnet")
    h100 = load_catalogue()["h100-sxm"]
    plan = complete(published_scores.template(h100), {"tp": 1, "pp": 1, "micro_batch": 50, "zero": 0}, 64)
    without = step_time(cost, 3200, plan, h100, Efficiency(0.2))
    with_fixed = step_time(cost, 3200, plan, h100, Efficiency(0.2, step_overhead_s=0.003))
    assert with_fixed.step_s - without.step_s == pytest.approx(0.003)
    assert ("fixed per step (calibrated: launches, host sync)", pytest.approx(0.003)) in with_fixed.rows()


@pytest.fixture(scope="module")
def unet3d(catalogue, mlperf_dir):
    return published_scores.load_suite(SUITE, catalogue, lambda: mlperf_dir, only="unet3d").benchmarks["unet3d"]


def test_extrapolation_fits_only_the_small_systems_and_predicts_those_4x_larger(unet3d):
    rows = published_scores.extrapolation(unet3d, gap=4)
    assert rows
    for r in rows:
        group = unet3d.groups[r.entry.accelerator.id]
        fitted = [e for e in group if e.row.key in r.fit.fitted_on]
        assert r.entry.row.key not in r.fit.fitted_on
        assert r.entry.row.count >= 4 * max(e.row.count for e in fitted)
    eos = next(r for r in rows if r.entry.row.count == 72)
    # the 72-GPU entry planned as NVIDIA's config ran it, predicted from the 4- and 8-GPU entries
    assert eos.entry.layout_source.endswith("config_DGXH100_9x8x1.sh")
    assert eos.entry.prediction.global_batch_size == 72
    assert abs(eos.error) < 0.25  # the fixed evaluation cost fitted on 8 GPUs once made this +167%


def test_the_suite_can_be_planned_as_the_search_would(catalogue, mlperf_dir):
    searched = published_scores.load_suite(SUITE, catalogue, lambda: mlperf_dir, only="unet3d", published_layouts=False)
    assert all(e.layout_source == published_scores.SEARCHED for g in searched.benchmarks["unet3d"].groups.values() for e in g)


@pytest.fixture(scope="module")
def maskrcnn(catalogue, mlperf_dir):
    return published_scores.load_suite(SUITE, catalogue, lambda: mlperf_dir, only="maskrcnn").benchmarks["maskrcnn"]


def test_a_fixed_cost_per_step_is_fitted_only_where_the_entries_differ_in_batch_per_replica(maskrcnn):
    # H100 PCIe: 4 and 8 GPUs, all 12 images per GPU (their submitters' files): a fixed cost per step
    # and the per-image cost trade exactly, so the fit holds the fixed cost at none
    pcie = maskrcnn.groups["h100-pcie"]
    assert {published_scores.replica_batch(e) for e in pcie} == {12}
    assert all(not e.layout_source.startswith(published_scores.SEARCHED) for e in pcie)
    fit = published_scores.fit_group(maskrcnn, "h100-pcie")
    assert not fit.step_overhead_fitted and fit.efficiency.step_overhead_s == 0
    # H100 SXM: Eos's 64 GPUs at 4 images per GPU beside the others' 12 tell the two apart
    sxm = published_scores.fit_group(maskrcnn, "h100-sxm")
    assert sxm.step_overhead_fitted and sxm.efficiency.step_overhead_s > 0
    # fitted on the entries of up to 8 GPUs (all 12 images per GPU) to predict Eos's 64, it cannot
    (eos,) = published_scores.extrapolation(maskrcnn, gap=4)
    assert eos.entry.row.count == 64 and eos.entry.layout_source.endswith("config_DGXH100_multi_8x8x4.sh")
    assert not eos.fit.step_overhead_fitted and eos.fit.efficiency.step_overhead_s == 0
