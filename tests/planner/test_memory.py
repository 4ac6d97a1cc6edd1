import pytest

from trainclock.planner.model.memory import layer_activation_bytes, memory_per_accelerator
from trainclock.planner.model.workload_view import cost_model

from .helpers import accelerator, plan

COST = cost_model("gpt3-175b")
N_175B = 174_604_259_328
H100_LIKE = accelerator(memory_bytes=80e9)


def test_175b_unsharded_needs_18_bytes_per_parameter_for_states():
    m = memory_per_accelerator(COST, 1536, plan(zero=0, precision="bf16"), H100_LIKE)
    assert (m.weights, m.gradients, m.optimizer) == (2 * N_175B, 4 * N_175B, 12 * N_175B)  # bf16, fp32 grads, Adam
    assert m.total > 3.1e12 and not m.fits


def test_nvidia_layout_of_the_512_gpu_entry_fits_80gb_by_hand():
    # TP 4 x PP 8 x DP 16, 12 layers per stage interleaved one per virtual stage, FP8, optimizer sharded
    layout = plan(tp=4, pp=8, dp=16, vp=12, sequence_parallel=True, recompute="selective", zero=1, precision="fp8")
    m = memory_per_accelerator(COST, 2048, layout, H100_LIKE)
    stage_parameters = (12 * 1_812_099_072 + 642_748_416) / 4  # 12 layers and the embedding, split 4 ways
    assert m.stage == "first stage"
    assert m.weights == pytest.approx(stage_parameters * 4)  # bf16 + fp8 copy and transpose
    assert m.gradients == pytest.approx(stage_parameters * 4)
    assert m.optimizer == pytest.approx(stage_parameters * 12 / 16)
    # 8 micro-batches in flight x (1 + 7/96) for interleaving, 12 layers, s*b*h*34/t bytes each
    assert m.activations == pytest.approx(12 * 8 * (1 + 7 / 96) * 2048 * 12288 * 34 / 4)
    assert m.total == pytest.approx(71.006e9, rel=1e-4)
    assert m.fits  # it ran: 71.0 GB of the 72 GB usable


@pytest.mark.parametrize("recompute, sp, coefficient", [
    ("none", False, 10 + 24 / 4 + 5 * 96 * 2048 / (12288 * 4)),
    ("none", True, 34 / 4 + 5 * 96 * 2048 / (12288 * 4)),
    ("selective", False, 10 + 24 / 4),
    ("selective", True, 34 / 4),
    ("full", True, 2 / 4),
])
def test_activation_bytes_follow_korthikanti_2022(recompute, sp, coefficient):
    layout = plan(tp=4, micro_batch=2, sequence_parallel=sp, recompute=recompute)
    assert layer_activation_bytes(COST, layout) == pytest.approx(2048 * 2 * 12288 * coefficient)
    fp32 = plan(tp=4, micro_batch=2, sequence_parallel=sp, recompute=recompute, precision="fp32")
    assert layer_activation_bytes(COST, fp32) == 2 * layer_activation_bytes(COST, layout)  # 32-bit values


def test_sharding_divides_what_zero_stages_say():
    base = dict(tp=8, pp=8, dp=4, recompute="selective", sequence_parallel=True, precision="bf16")
    z0, z2, z3 = (memory_per_accelerator(COST, 1536, plan(zero=z, **base), H100_LIKE) for z in (0, 2, 3))
    assert z2.optimizer == pytest.approx(z0.optimizer / 4) and z2.gradients == pytest.approx(z0.gradients / 4)
    assert z3.weights < z0.weights / 4 + 2 * 1_812_099_072 / 8 * 2 + 1  # a quarter, plus two gathered layers
