"""The sensitivity table: each assumption at -10% and +10%, the layout held."""

import pytest

from trainclock.planner.calibration import result_files
from trainclock.planner.model.sensitivity import sensitivities


@pytest.fixture(scope="module")
def prediction(data):
    entry = data.entry("v3.0/coreweave_hgxh100_n448_ngc23.04_pytorch")
    fits = result_files.fit(data)
    return result_files.entry_prediction(data, entry, fits[entry.stack.id].efficiency)


def test_each_assumption_moves_the_prediction_the_way_physics_says(prediction):
    rows = {r.knob: r for r in sensitivities(prediction)}
    slower_when_less = ("matmul efficiency (calibrated)", "inter-node bandwidth", "intra-node bandwidth")
    for knob in slower_when_less:
        assert rows[knob].minus > 0 > rows[knob].plus, knob
    for knob in ("evaluation overhead (calibrated)", "run overhead (calibrated)", "inter-node latency"):
        assert rows[knob].minus < 0 < rows[knob].plus, knob
    # compute is most of a GPT-3 step: 10% less matmul efficiency costs more than 10% of the compute share
    compute = prediction.step.compute_s * prediction.steps / prediction.time_to_train_s
    assert rows["matmul efficiency (calibrated)"].minus == pytest.approx(compute * (1 / 0.9 - 1), rel=0.15)


def test_rows_come_largest_first_and_zero_knobs_are_left_out(prediction):
    from dataclasses import replace

    rows = sensitivities(prediction)
    assert [r.swing for r in rows] == sorted((r.swing for r in rows), reverse=True)
    assert rows[0].knob == "matmul efficiency (calibrated)"
    no_overheads = replace(prediction, efficiency=replace(prediction.efficiency, eval_overhead_s=0.0, run_overhead_s=0.0))
    assert not any("overhead" in r.knob for r in sensitivities(no_overheads))
