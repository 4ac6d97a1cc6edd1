"""Time-to-train of one plan: steps to the target x step time + evaluations x evaluation time (plus,
where evaluation scores asynchronously, the last evaluation's scoring) + the run's fixed overhead
(start-up and warm-up inside the timed region), init excluded as in MLPerf (the clock runs from
run_start to run_stop)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainclock.planner.model.convergence import ConvergenceModel, eval_interval_samples
from trainclock.planner.model.feasibility import require_valid
from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.memory import MemoryBreakdown, memory_per_accelerator
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.step_time import Efficiency, StepBreakdown, eval_seconds, step_time
from trainclock.workload.cost_model import WorkloadCost


@dataclass(frozen=True)
class Prediction:
    cost: WorkloadCost
    accelerator: Accelerator
    global_batch_size: int
    plan: Plan
    efficiency: Efficiency
    samples: int  # trained until the run stops, at an evaluation
    samples_source: str
    steps: int
    evaluations: int
    step: StepBreakdown
    eval_s: float  # one evaluation
    memory: MemoryBreakdown

    @property
    def count(self) -> int:
        return self.plan.accelerators

    @property
    def units(self) -> float:
        """What was trained, in the benchmark's progress unit (cost.progress_unit)."""
        return self.samples * self.cost.units_per_sample

    @property
    def train_s(self) -> float:
        return self.steps * self.step.step_s

    @property
    def evals_s(self) -> float:
        """Evaluations on the clock: each one's blocking part, plus what asynchronous scoring adds."""
        return self.evaluations * self.eval_s + self.eval_async_exposed_s

    @property
    def eval_async_exposed_s(self) -> float:
        """What asynchronous scoring (efficiency.eval_async_s per evaluation) adds to the run: the
        last evaluation's, since the run stops only when it reports the target reached; the earlier
        ones' run beside the training that follows them (each in a worker of its own on the host:
        none waits for another, nor does training)."""
        return self.efficiency.eval_async_s if self.evaluations else 0.0

    @property
    def run_overhead_s(self) -> float:
        return self.efficiency.run_overhead_s

    @property
    def time_to_train_s(self) -> float:
        return self.train_s + self.evals_s + self.run_overhead_s

    @property
    def samples_per_s(self) -> float:
        """Training throughput, evaluations excluded."""
        return self.samples / self.train_s

    @property
    def units_per_s(self) -> float:
        return self.units / self.train_s

    @property
    def mfu(self) -> float:
        """Model FLOPs per second over the peak of the plan's precision, all accelerators."""
        achieved = self.samples_per_s * self.cost.flops_per_sample.total
        return achieved / (self.count * self.accelerator.peak(self.plan.precision))


def predict(cost: WorkloadCost, accelerator: Accelerator, global_batch_size: int, plan: Plan, efficiency: Efficiency,
            convergence: ConvergenceModel | None = None, units: float | None = None,
            samples: int | None = None) -> Prediction:
    """Give `units` (of cost.progress_unit, e.g. tokens) to train that many, rounded up to an
    evaluation; else `samples` (an earlier prediction's, kept as they are); else `convergence`
    decides: the samples its points say the runs train on average, in whole steps, and as many
    evaluations as fit in them (at least one: the run stops at an evaluation)."""
    require_valid(plan, cost, plan.accelerators, global_batch_size)
    interval = eval_interval_samples(cost, global_batch_size)
    if units is not None:
        samples = math.ceil(units / cost.units_per_sample / interval) * interval
        source = "given (--tokens), rounded up to an evaluation"
    elif samples is not None:
        source = "as planned"
    elif convergence is not None:
        samples, source = convergence.expected_samples(global_batch_size), convergence.source
    else:
        raise ValueError("predict needs units, samples or a convergence model")
    evaluations = samples // interval if samples % interval == 0 else max(1, round(samples / interval))
    return Prediction(
        cost=cost, accelerator=accelerator, global_batch_size=global_batch_size, plan=plan, efficiency=efficiency,
        samples=samples, samples_source=source, steps=samples // global_batch_size, evaluations=evaluations,
        step=step_time(cost, global_batch_size, plan, accelerator, efficiency),
        eval_s=eval_seconds(cost, plan, accelerator, efficiency),
        memory=memory_per_accelerator(cost, global_batch_size, plan, accelerator),
    )
