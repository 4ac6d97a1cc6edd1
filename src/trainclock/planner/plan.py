"""From a question (workload member, accelerator, count, optional batch, layout, progress to
train) to a prediction: which calibration applies, which layout (given or the best found), how far
to train."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from trainclock.errors import UsageError
from trainclock.planner import calibration
from trainclock.planner.calibration import Calibrated, published_scores, result_files
from trainclock.planner.calibration.mlperf_data import results_dir
from trainclock.planner.calibration.own_runs import OwnRun, OwnRunsSource, measured_peaks
from trainclock.planner.model import hardware, search
from trainclock.planner.model.convergence import ConvergenceModel, load_convergence
from trainclock.planner.model.feasibility import layout_problems, require_valid
from trainclock.planner.model.hardware import THIS_CPU, Accelerator
from trainclock.planner.model.parallel_plan import complete
from trainclock.planner.model.predict import Prediction, predict
from trainclock.planner.model.published_layouts import PublishedLayout, published_layout
from trainclock.planner.model.workload_view import cost_model
from trainclock.workload.cost_model import WorkloadCost

# How a plan's layout was chosen: by the search (its result), as a submission ran it, or given (None).
LayoutChoice = search.SearchResult | PublishedLayout | None

class Planner:
    """Answers plans for one workload member; loads the MLPerf data only if a plan needs it."""

    def __init__(self, cost: WorkloadCost, catalogue: dict[str, Accelerator], mlperf_dir: Path | None = None,
                 own_runs: Sequence[OwnRun] = ()) -> None:
        self.cost = cost
        self.catalogue = catalogue
        self._mlperf_dir = mlperf_dir
        self.own_runs = own_runs  # trainclock's stored runs on this machine: this-cpu's calibration
        # the calibration sources, tried in this order (calibration/__init__.py)
        self.sources: tuple[calibration.Source, ...] = (
            OwnRunsSource(own_runs, self.convergence),
            calibration.GivenEfficiency(),
            published_scores.PublishedScoresSource(catalogue, self.mlperf_folder),
            result_files.ResultFilesSource(catalogue, self.mlperf_folder),
        )

    def accelerator(self, accelerator_id: str) -> Accelerator:
        """The catalogue's accelerator; this-cpu at the matmul peaks its calibration runs measured
        (a plan calibrated on them divides by the same), measured now where none are stored."""
        if accelerator_id != THIS_CPU:
            return hardware.find(self.catalogue, accelerator_id)
        import torch  # lazily: planning a cluster never loads torch

        return hardware.this_cpu(*measured_peaks(self.own_runs, self.cost.name, torch.get_num_threads()))

    def mlperf_folder(self) -> Path:
        return results_dir(self._mlperf_dir)

    def convergence(self) -> ConvergenceModel:
        return load_convergence(self.cost, self.mlperf_folder)

    def calibrated(self, accelerator: Accelerator, stack: str | None = None, efficiency: float | None = None) -> Calibrated:
        """`efficiency` (--efficiency) overrides the fit; `stack` (--stack) picks a calibration;
        by default the first of the sources that applies (calibration/__init__.py)."""
        return calibration.calibrate(calibration.Request(self.cost, accelerator, stack, efficiency), self.sources)

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
            if not result.ranked and convergence is not None and global_batch_size is None:
                beyond = self._beyond_convergence(accelerator, count, calibrated, published, convergence)
                if beyond is not None:
                    return beyond
            try:
                search.require_some(result, self.cost, accelerator, count, global_batch_size)
            except UsageError as e:
                raise UsageError(f"{e}{published_problem}") from None
            return result.ranked[0], result
        return self._given(accelerator, count, calibrated, given, global_batch_size, units, convergence), None

    def _beyond_convergence(self, accelerator: Accelerator, count: int, calibrated: Calibrated,
                            published: PublishedLayout | None,
                            convergence: ConvergenceModel) -> tuple[Prediction, LayoutChoice] | None:
        """Where no batch inside the convergence data can run on `count` accelerators (each replica
        needs a whole sample, so the smallest batch a layout runs lies above the largest convergence
        point): the submission's batch at this scale, or else the smallest batch that plain data
        parallelism runs, with the progress to target extrapolated to it (ConvergenceModel.extended_to,
        which the prediction's progress source says). None where no layout runs even so."""
        if published is not None and published.global_batch_size > convergence.batch_range[1]:
            try:
                return self._given(accelerator, count, calibrated, published.layout, published.global_batch_size,
                                   None, convergence.extended_to(published.global_batch_size)), published
            except UsageError:
                pass
        batch = math.ceil(convergence.batch_range[1] / count) * count
        extended = convergence.extended_to(batch)
        result = search.search(self.cost, accelerator, count, calibrated.efficiency, calibrated.template, {}, None,
                               extended)
        return (result.ranked[0], result) if result.ranked else None

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
