"""The planner works from the generic cost interface: a made-up image classifier (no tensor or
pipeline parallelism, progress in epochs) is planned with the interface's defaults."""

from dataclasses import dataclass

import pytest

from trainclock.errors import DataError
from trainclock.mllog.progress import ProgressCodec
from trainclock.planner.model import search
from trainclock.planner.model.convergence import load_convergence
from trainclock.planner.model.feasibility import layout_problems
from trainclock.planner.model.memory import memory_per_accelerator
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.step_time import Efficiency
from trainclock.workload.cost_model import ConvergencePoints, SampleFlops, WorkloadCost

from .helpers import accelerator, plan

IMAGES = 1024 * 1024  # samples per epoch: whole steps of 1024


@dataclass(frozen=True)
class Classifier(WorkloadCost):
    name: str = "toy-classifier"
    benchmark: str = "resnet"
    mlperf_round: str = "3.1"  # the round whose resnet reference points it plans with
    parameter_count: int = 25_000_000
    layers: int = 1  # nothing for a pipeline to cut
    layer_parameters: float = 25_000_000
    other_parameters: float = 0
    tensor_parallel_units: int = 1  # no tensor parallelism
    tensor_parallel_unit: str = "output channels"
    flops_per_sample: SampleFlops = SampleFlops(weights=3 * 8e9)  # all convolutions: weights' matmuls
    boundary_values_per_sample: float = 0
    optimizer_state_bytes_per_parameter: float = 4  # SGD momentum
    progress: ProgressCodec = ProgressCodec("images", 1, "epochs", samples_per_epoch=IMAGES)  # its log counts epochs
    sample_noun: str = "images"
    reference_batch_size: int = 1024
    eval_every_samples: int = IMAGES  # every epoch
    eval_samples: int = 50_000

    def layer_activation_bytes(self, micro_batch, tp, sequence_parallel, recompute):
        return micro_batch * 100e6

    def convergence(self, mlperf_dir):
        return ConvergencePoints(((1024, 36.0), (4096, 40.0)), "made up")


def test_a_non_transformer_is_planned_data_parallel_with_the_defaults():
    cost = Classifier()
    assert isinstance(cost, WorkloadCost)
    assert (cost.progress_unit, cost.units_per_sample) == ("epochs", 1 / IMAGES)  # from its progress codec
    assert (cost.output_bytes(32, 1), cost.tp_collectives_per_layer, cost.measured_efficiency()) == (0.0, 2, None)
    convergence = load_convergence(cost, lambda: pytest.fail("no MLPerf data needed"))
    acc = accelerator()
    found = search.search(cost, acc, 8, Efficiency(0.5), Plan(zero=0), {}, 1024, convergence)
    assert found.ranked and {(p.plan.layout.tp, p.plan.layout.pp) for p in found.ranked} == {(1, 1)}
    assert {p.plan.recompute for p in found.ranked} == {"none", "selective", "full"}  # the default choices
    assert found.ranked[0].plan.recompute == "none"  # memory is plenty: recomputing gains nothing
    best = found.ranked[0]
    assert best.units == pytest.approx(36.0) and best.evaluations == 36  # a run stops at the epoch past the target
    assert best.samples == 36 * IMAGES and best.memory.logits == 0.0
    assert best.mfu < 0.5  # compute at 50% of peak, plus the optimizer and evaluations
    m = memory_per_accelerator(cost, 1024, plan(dp=8, zero=0, recompute="none", micro_batch=128), acc)
    assert m.optimizer == 25e6 * (4 + 4)  # fp32 master weights and the momentum
    assert m.activations == 128 * 100e6
    assert layout_problems(plan(tp=2, dp=4), cost, 8, 1024)[0] == \
        "tensor parallel: tp=2 does not divide toy-classifier's 1 output channels"


def test_the_default_convergence_reads_mlperfs_rcps(mlperf_dir):
    class FromRcps(Classifier):
        convergence = WorkloadCost.convergence

    assert FromRcps(benchmark="bert").convergence(lambda: mlperf_dir).source == "MLPerf RCPs training_3.1.0"
    # a benchmark the folder lacks falls back to the installed rules package; one neither has is an error
    assert FromRcps(benchmark="resnet").convergence(lambda: mlperf_dir).points
    with pytest.raises(DataError, match="no rcps/training_\\*/rcps_toy.json"):
        FromRcps(benchmark="toy").convergence(lambda: mlperf_dir)


def test_rcps_are_read_in_the_units_their_round_counts(tmp_path):
    from trainclock.workload.cost_model import rcp_convergence

    # 3.1's tables count epochs; the later rounds' tables of sample-counting benchmarks count samples
    epochs = rcp_convergence(tmp_path, "bert", "3.1")
    samples = rcp_convergence(tmp_path, "llama2_70b_lora", "6.1")
    assert epochs.source == "MLPerf RCPs training_3.1.0" and samples.source == "MLPerf RCPs training_6.1.0"
    assert dict(samples.points)[8] > 1000 and all(bs > 0 and units > 0 for bs, units in epochs.points)


@pytest.mark.parametrize("member", ["gpt3-175b", "bert-large", "resnet-50", "sd-laion400m", "llama2_70b_lora-70b",
                                    "dlrm-criteo1tb"])
def test_the_plan_counts_progress_as_the_members_log_does(member):
    from trainclock.planner.model.workload_view import cost_model

    cost = cost_model(member)
    codec = cost.progress  # the codec of the Progress its runs log (workloads/<name>/cost.py run_progress)
    samples = 64 * cost.reference_batch_size
    logged = codec.count(samples) * (codec.samples_per_step if codec.logged_in == "steps" else 1)
    assert logged == pytest.approx(samples * cost.units_per_sample)  # a logged step is a batch of samples
