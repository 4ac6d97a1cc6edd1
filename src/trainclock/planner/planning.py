"""From a question (workload member, accelerator, count, optional batch, layout, progress to
train) to a prediction: which calibration applies, which layout (given or the best found), how far
to train."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from trainclock.errors import DataError, UsageError
from trainclock.planner import calibrate, hardware, own_runs, search, suite
from trainclock.planner.convergence import ConvergenceModel, load_convergence
from trainclock.planner.hardware import THIS_CPU, Accelerator
from trainclock.planner.mlperf_data import results_dir
from trainclock.planner.own_runs import OwnRun
from trainclock.planner.plan import LAYOUT_FIELDS, Plan, complete
from trainclock.planner.predict import Prediction, predict
from trainclock.planner.published_layouts import PublishedLayout, published_layout
from trainclock.planner.step_time import Efficiency
from trainclock.planner.validity import layout_problems, require_valid
from trainclock.planner.workload import cost_model
from trainclock.workload.cost_model import WorkloadCost

# How a plan's layout was chosen: by the search (its result), as a submission ran it, or given (None).
LayoutChoice = search.SearchResult | PublishedLayout | None

# Used when no calibrated stack says otherwise: what current frameworks do by default.
GENERIC_LAYOUT = {"sequence_parallel": True, "recompute": "selective", "zero": 1, "overlap": True}


@dataclass(frozen=True)
class Calibrated:
    """The efficiency and layout template a plan uses, and where they come from."""

    efficiency: Efficiency
    template: Plan  # precision, overlap, sharding... of the software stack
    source: str
    # what a plan keeps of how the calibration runs ran, unless --layout says otherwise (this CPU's
    # stored runs: their micro-batch, at which their efficiency was measured)
    fixed: dict[str, object] = field(default_factory=dict)
    convergence: ConvergenceModel | None = None  # the calibration runs' progress to target, where it stands


class Planner:
    """Answers plans for one workload member; loads the MLPerf data only if a plan needs it."""

    def __init__(self, cost: WorkloadCost, catalogue: dict[str, Accelerator], mlperf_dir: Path | None = None,
                 own_runs: Sequence[OwnRun] = ()) -> None:
        self.cost = cost
        self.catalogue = catalogue
        self._mlperf_dir = mlperf_dir
        self.own_runs = own_runs  # trainclock's stored runs on this machine: this-cpu's calibration

    def accelerator(self, accelerator_id: str) -> Accelerator:
        """The catalogue's accelerator; this-cpu at the matmul peaks its calibration runs measured
        (a plan calibrated on them divides by the same), measured now where none are stored."""
        if accelerator_id != THIS_CPU:
            return hardware.find(self.catalogue, accelerator_id)
        import torch  # lazily: planning a cluster never loads torch

        return hardware.this_cpu(*own_runs.measured_peaks(self.own_runs, self.cost.name, torch.get_num_threads()))

    def mlperf_folder(self) -> Path:
        return results_dir(self._mlperf_dir)

    @cached_property
    def calibration(self) -> dict[str, calibrate.StackFit]:
        return calibrate.fit(calibrate.load_calibration_data(self.mlperf_folder(), self.catalogue))

    def convergence(self) -> ConvergenceModel:
        return load_convergence(self.cost, self.mlperf_folder)

    def calibrated(self, accelerator: Accelerator, stack: str | None = None, efficiency: float | None = None) -> Calibrated:
        """`efficiency` (--efficiency) overrides the fit; `stack` (--stack) picks a calibration;
        by default the accelerator's latest stack, or that of the accelerator it is `like`."""
        if efficiency is not None and not 0 < efficiency <= 1:
            raise UsageError(f"--efficiency {efficiency}: give the fraction of peak FLOP/s the matmuls reach, in (0, 1]")
        if accelerator.id == THIS_CPU and stack is None:
            import torch  # lazily, as hardware.this_cpu: planning a cluster never loads torch

            from trainclock.device.peak import resolve_precision

            precision = resolve_precision("auto", torch.device("cpu"))  # fp32 on a CPU without bf16 instructions
            template = replace(Plan(), **calibrate.CPU_LAYOUT, precision=precision)
            if efficiency:
                return Calibrated(Efficiency(efficiency), template, "given (--efficiency)")
            chosen = own_runs.calibration_runs(self.own_runs, self.cost.name, precision, torch.get_num_threads())
            stored = own_runs.fit(self.cost, accelerator, chosen)
            if stored is None:  # no stored run on this CPU: the reference runs' MFU
                reference, source = calibrate.own_runs_efficiency(self.cost)
                return Calibrated(reference, template, source)
            return Calibrated(stored.efficiency, template, stored.source, {"micro_batch": stored.micro_batch},
                              own_runs.own_convergence(self.cost, chosen, self.convergence()))
        if stack is None and efficiency is not None:
            return Calibrated(Efficiency(efficiency), self._generic_template(accelerator), "given (--efficiency)")
        own_benchmark = stack is None and self.cost.benchmark not in suite.OWN_CALIBRATION
        if own_benchmark and (found := self._suite_fit(accelerator)) is not None:
            whose, fit = found
            borrowed = "" if whose == accelerator.id else f", borrowed from {whose}"
            return Calibrated(fit.efficiency, suite.template(accelerator),
                              f"published v3.1 {self.cost.benchmark} scores of {len(fit.fitted_on)} {whose} "
                              f"entr{'y' if len(fit.fitted_on) == 1 else 'ies'}{borrowed}"
                              + (suite.OVERCOUNT_NOTE if fit.efficiency.compute > 1 else ""))
        fit = self._stack_fit(accelerator, stack)
        # the stack's habits, not its shape: tp, pp, dp and vp come from --layout or the search
        template = replace(Plan(), **{k: v for k, v in fit.stack.layout.items() if k not in LAYOUT_FIELDS})
        if efficiency is not None:
            return Calibrated(Efficiency(efficiency, fit.efficiency.eval_overhead_s), template,
                              f"given (--efficiency), evaluation overhead of {fit.stack.id}")
        borrowed = "" if fit.stack.accelerator.id == accelerator.id else f", borrowed from {fit.stack.accelerator.id}"
        if own_benchmark:  # no published result of this benchmark on this accelerator: GPT-3's stack stands in
            borrowed += f"; no published {self.cost.benchmark} result on {accelerator.id}"
        return Calibrated(fit.efficiency, template, f"{fit.stack.id} ({fit.stack.software}){borrowed}")

    @cached_property
    def _suite(self) -> suite.Benchmark | None:
        try:
            data = suite.load_suite(suite.suite_dir(), self.catalogue, self.mlperf_folder, only=self.cost.benchmark)
        except DataError:
            return None  # no published scores beside the repository: the GPT-3 stacks stand in
        return data.benchmarks.get(self.cost.benchmark)

    def _suite_fit(self, accelerator: Accelerator) -> tuple[str, suite.GroupFit] | None:
        return suite.fit_for(self._suite, accelerator) if self._suite is not None else None

    def _stack_fit(self, accelerator: Accelerator, stack: str | None) -> calibrate.StackFit:
        fits = self.calibration
        if stack is not None:
            if stack not in fits:
                raise UsageError(f"unknown --stack {stack!r}; calibrated stacks: {', '.join(sorted(fits))}")
            return fits[stack]
        for candidate in (accelerator.id, accelerator.like):
            own = [f for f in fits.values() if f.stack.accelerator.id == candidate]
            if own:
                return max(own, key=lambda f: f.stack.round)
        raise UsageError(f"{accelerator.id} has no calibration (no published result in the calibration data): give "
                         f"--efficiency F (the fraction of peak FLOP/s its matmuls reach, e.g. 0.4) or borrow one "
                         f"with --stack, one of: {', '.join(sorted(fits))}")

    def _generic_template(self, accelerator: Accelerator) -> Plan:
        precision = "bf16" if "bf16" in accelerator.peak_flops else "fp32"
        return replace(Plan(), precision=precision, **GENERIC_LAYOUT)

    @cached_property
    def full_size(self) -> bool:
        """Whether the member is its benchmark's full size: the one MLPerf submissions run."""
        return self.cost.name == cost_model(self.cost.benchmark).name

    def published(self, accelerator: Accelerator, count: int) -> PublishedLayout | None:
        """How the benchmark's submission on `count` x `accelerator` ran, where a configuration
        file says (full-size members only)."""
        return published_layout(self.cost.benchmark, accelerator.id, count) if self.full_size else None

    def plan(self, accelerator: Accelerator, count: int, calibrated: Calibrated, given: dict[str, object],
             global_batch_size: int | None = None, units: float | None = None) -> tuple[Prediction, LayoutChoice]:
        """With a --layout (`given`, the rest from the stack's template): that layout, even if it
        does not fit in memory (the prediction says so), at the given batch or the best of its
        candidate batches. Without a layout or batch, at a count a submission ran: its batch and
        layout (and the PublishedLayout as the second item), unless they cannot run here. Else: the
        best layout the search finds, and the search. `units` (--tokens): train that far instead
        of what the convergence model says."""
        if count < 1:
            raise UsageError(f"--count must be at least 1, got {count}")
        if count > accelerator.accelerators_per_node and accelerator.inter_node_bandwidth == 0:
            raise UsageError(f"{accelerator.id} has no inter-node network in the catalogue, so at most "
                             f"{accelerator.accelerators_per_node} of them; lower --count")
        convergence = None if units is not None else calibrated.convergence or self.convergence()
        given = {**calibrated.fixed, **given}
        published = self.published(accelerator, count) if not given and global_batch_size is None else None
        published_problem = ""
        if published is not None:
            try:
                return self._given(accelerator, count, calibrated, published.layout, published.global_batch_size,
                                   units, convergence), published
            except UsageError as e:  # e.g. its batch lies outside the convergence data: the search decides
                published_problem = (f"; the submission at this scale ran batch {published.global_batch_size:,} "
                                     f"({published.source}), which the planner cannot: {e}")
        if not given:
            result = search.search(self.cost, accelerator, count, calibrated.efficiency, calibrated.template, {},
                                   global_batch_size, convergence, units)
            try:
                search.require_some(result, self.cost, accelerator, count, global_batch_size)
            except UsageError as e:
                raise UsageError(f"{e}{published_problem}") from None
            return result.ranked[0], result
        return self._given(accelerator, count, calibrated, given, global_batch_size, units, convergence), None

    def _given(self, accelerator: Accelerator, count: int, calibrated: Calibrated, given: dict[str, object],
               global_batch_size: int | None, units: float | None, convergence: ConvergenceModel | None) -> Prediction:
        plan = complete(calibrated.template, given, count)
        sizes = search.batch_sizes(self.cost, plan, global_batch_size, convergence)
        if not sizes:
            raise UsageError(f"no global batch in the convergence data's range is a multiple of what {plan.short()} "
                             f"runs per step; give --gbs or change --layout")
        valid = [g for g in sizes if not layout_problems(plan, self.cost, count, g)]
        require_valid(plan, self.cost, count, valid[0] if valid else sizes[0])
        options = [predict(self.cost, accelerator, g, plan, calibrated.efficiency, convergence, units) for g in valid]
        return min(options, key=lambda p: p.time_to_train_s)
