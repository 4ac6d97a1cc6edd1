"""Which assumption moves a prediction most: each calibrated efficiency and each catalogue
bandwidth and latency changed by -10% and +10% in turn, the layout and batch held, so a user knows
what to measure first."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.planner.model.predict import Prediction, predict

STEP = 0.10
# (what a row says, where the number lives, its field): the efficiencies the calibration fits, then
# the accelerator's datasheet figures the step-time model divides by
KNOBS = (
    ("matmul efficiency (calibrated)", "efficiency", "compute"),
    ("evaluation matmul efficiency (calibrated)", "efficiency", "eval_compute"),
    ("evaluation overhead (calibrated)", "efficiency", "eval_overhead_s"),
    ("last evaluation's asynchronous scoring (measured)", "efficiency", "eval_async_s"),
    ("run overhead (calibrated)", "efficiency", "run_overhead_s"),
    ("fixed cost per step (calibrated)", "efficiency", "step_overhead_s"),
    ("memory bandwidth", "accelerator", "memory_bandwidth"),
    ("intra-node bandwidth", "accelerator", "intra_node_bandwidth"),
    ("inter-node bandwidth", "accelerator", "inter_node_bandwidth"),
    ("intra-node latency", "accelerator", "intra_node_latency"),
    ("inter-node latency", "accelerator", "inter_node_latency"),
)


@dataclass(frozen=True)
class Sensitivity:
    knob: str
    minus: float  # relative change of the time-to-train with the knob at -10%
    plus: float  # ... at +10%

    @property
    def swing(self) -> float:
        return max(abs(self.minus), abs(self.plus))


def sensitivities(p: Prediction) -> list[Sensitivity]:
    """Every knob's effect on the time-to-train of `p` (same layout, batch and progress), the
    largest first; knobs that are zero here (no evaluation overhead, say) are left out."""
    rows = []
    for label, owner, field in KNOBS:
        base = getattr(p.efficiency if owner == "efficiency" else p.accelerator, field)
        if not base:
            continue
        changed = [_rerun(p, owner, field, base * (1 + sign * STEP)).time_to_train_s / p.time_to_train_s - 1
                   for sign in (-1, 1)]
        rows.append(Sensitivity(label, *changed))
    return sorted(rows, key=lambda r: r.swing, reverse=True)


def _rerun(p: Prediction, owner: str, field: str, value: float) -> Prediction:
    efficiency, accelerator = p.efficiency, p.accelerator
    if owner == "efficiency":
        efficiency = replace(efficiency, **{field: min(value, 1.0) if field in ("compute", "eval_compute") else value})
    else:
        accelerator = replace(accelerator, **{field: value})
    return predict(p.cost, accelerator, p.global_batch_size, p.plan, efficiency, samples=p.samples)
