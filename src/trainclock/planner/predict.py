"""Time-to-train of one plan: steps to the target x step time + evaluations x evaluation time,
init excluded as in MLPerf (the clock runs from run_start to run_stop)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainclock.planner.convergence import ConvergenceModel, eval_interval_tokens
from trainclock.planner.hardware import Accelerator
from trainclock.planner.layout import Layout, require_valid
from trainclock.planner.memory import MemoryBreakdown, memory_per_accelerator
from trainclock.planner.step_time import Efficiency, StepBreakdown, eval_seconds, step_time
from trainclock.workloads.gpt3.spec import GPT3Spec


@dataclass(frozen=True)
class Prediction:
    spec: GPT3Spec
    accelerator: Accelerator
    global_batch_size: int
    layout: Layout
    efficiency: Efficiency
    tokens: int  # trained until the run stops, at an evaluation
    tokens_source: str
    steps: int
    evaluations: int
    step: StepBreakdown
    eval_s: float  # one evaluation
    memory: MemoryBreakdown

    @property
    def count(self) -> int:
        return self.layout.accelerators

    @property
    def train_s(self) -> float:
        return self.steps * self.step.step_s

    @property
    def evals_s(self) -> float:
        return self.evaluations * self.eval_s

    @property
    def time_to_train_s(self) -> float:
        return self.train_s + self.evals_s

    @property
    def tokens_per_s(self) -> float:
        """Training throughput, evaluations excluded."""
        return self.tokens / self.train_s

    @property
    def mfu(self) -> float:
        """Model FLOPs per second over the peak of the layout's precision, all accelerators."""
        achieved = self.tokens_per_s * self.spec.shape.flops_per_token(self.spec.seq_len)
        return achieved / (self.count * self.accelerator.peak(self.layout.precision))


def predict(spec: GPT3Spec, accelerator: Accelerator, global_batch_size: int, layout: Layout, efficiency: Efficiency,
            convergence: ConvergenceModel | None = None, tokens: int | None = None) -> Prediction:
    """Give `tokens` to train that many (rounded up to an evaluation), else `convergence` decides."""
    require_valid(layout, spec.shape, layout.accelerators, global_batch_size)
    interval = eval_interval_tokens(spec, global_batch_size)
    if tokens is not None:
        trained, source = math.ceil(tokens / interval) * interval, "given (--tokens), rounded up to an evaluation"
    elif convergence is not None:
        trained, source = convergence.tokens_to_target(global_batch_size, interval), convergence.source
    else:
        raise ValueError("predict needs tokens or a convergence model")
    tokens_per_step = global_batch_size * spec.seq_len
    return Prediction(
        spec=spec, accelerator=accelerator, global_batch_size=global_batch_size, layout=layout, efficiency=efficiency,
        tokens=trained, tokens_source=source, steps=trained // tokens_per_step, evaluations=trained // interval,
        step=step_time(spec.shape, spec.seq_len, global_batch_size, layout, accelerator, efficiency),
        eval_s=eval_seconds(spec.shape, spec.seq_len, spec.eval_sequences, layout, accelerator, efficiency),
        memory=memory_per_accelerator(spec.shape, spec.seq_len, global_batch_size, layout, accelerator),
    )
