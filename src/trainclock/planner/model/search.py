"""Layout search: every valid way to lay a workload out on N accelerators (divisibility, batch and
schedule constraints, memory fit), ranked by predicted time-to-train. Micro-batches are the cost model's choices and, unless --layout
fixes one, each replica's whole share of the batch (no gradient accumulation). Fields the user
fixes with --layout are kept; precision and overlap come from the software stack's template."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace

from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.planner.model.convergence import ConvergenceModel
from trainclock.planner.model.feasibility import layout_problems
from trainclock.planner.model.hardware import Accelerator
from trainclock.planner.model.memory import memory_per_accelerator
from trainclock.planner.model.parallel_plan import Plan
from trainclock.planner.model.predict import Prediction, predict
from trainclock.planner.model.step_time import Efficiency
from trainclock.workload.cost_model import WorkloadCost

MICRO_BATCHES = (1, 2, 4, 8)  # the default of cost.micro_batch_choices


@dataclass
class SearchResult:
    ranked: list[Prediction]  # layouts that fit, fastest first
    rejected: Counter = field(default_factory=Counter)  # why the others were dropped
    considered: int = 0
    best_over_memory: Prediction | None = None  # fastest of those that do not fit, to show why


def search(cost: WorkloadCost, accelerator: Accelerator, count: int, efficiency: Efficiency, template: Plan,
           given: dict[str, object], global_batch_size: int | None, convergence: ConvergenceModel | None,
           units: float | None = None) -> SearchResult:
    result = SearchResult(ranked=[])
    for plan in _candidates(cost, accelerator, count, template, given):
        sizes = batch_sizes(cost, plan, global_batch_size, convergence)
        if not sizes:
            low, high = convergence.batch_range
            result.rejected[f"batch: no global batch of {low:,} to {high:,} (the convergence data's range) is a "
                            f"multiple of what the layout runs per step"] += 1
        options = [(plan, gbs) for gbs in sizes]
        if "micro_batch" not in given and plan.micro_batch == cost.micro_batch_choices[0]:
            # each replica's whole share of the batch at once, as data-parallel runs train when it
            # fits: no gradient accumulation, so the gradients' reduction overlaps the whole backward
            single = replace(plan, micro_batch=1)
            options += [(whole, gbs) for gbs in batch_sizes(cost, single, global_batch_size, convergence)
                        if (whole := _whole_batch(plan, gbs)) is not None
                        and whole.micro_batch not in cost.micro_batch_choices]
        for plan, gbs in options:
            result.considered += 1
            problems = layout_problems(plan, cost, count, gbs)
            if problems:
                result.rejected[problems[0].split(":")[0]] += 1
                continue
            memory = memory_per_accelerator(cost, gbs, plan, accelerator)
            if not memory.fits:
                result.rejected["memory"] += 1
                if result.best_over_memory is None or memory.total < result.best_over_memory.memory.total:
                    result.best_over_memory = predict(cost, accelerator, gbs, plan, efficiency, convergence, units)
                continue
            result.ranked.append(predict(cost, accelerator, gbs, plan, efficiency, convergence, units))
    # ties (often: sharding that changes memory, not time) go to less traffic, then less memory
    result.ranked.sort(key=lambda p: (p.time_to_train_s, p.step.dp_comm_s, p.memory.total))
    return result


def require_some(result: SearchResult, cost: WorkloadCost, accelerator: Accelerator, count: int,
                 global_batch_size: int | None) -> None:
    """A UsageError saying why the search found no layout that fits, if it found none."""
    if result.ranked:
        return
    if result.best_over_memory is not None:
        m = result.best_over_memory.memory
        raise UsageError(f"no layout of {cost.name} on {count} x {accelerator.id} fits in memory: the smallest needs "
                         f"{m.total / 1e9:,.1f} GB per accelerator of {m.usable / 1e9:,.1f} GB usable "
                         f"({result.best_over_memory.plan.describe()}); use more accelerators or a bigger one")
    reasons = "; ".join(f"{n} x {why}" for why, n in result.rejected.most_common(3)) or "no candidate layouts"
    raise UsageError(f"no valid layout of {cost.name} on {count} x {accelerator.id}"
                     f"{f' at --gbs {global_batch_size}' if global_batch_size else ''} (rejected: {reasons}); "
                     f"change --count, --gbs or --layout")


def _candidates(cost: WorkloadCost, accelerator: Accelerator, count: int, template: Plan, given: dict[str, object]):
    tps = [given["tp"]] if "tp" in given else [t for t in _divisors(cost.tensor_parallel_units)
                                              if t <= accelerator.accelerators_per_node and count % t == 0]
    for tp in tps:
        pps = [given["pp"]] if "pp" in given else [p for p in _divisors(cost.layers) if count % (tp * p) == 0]
        for pp in pps:
            if count % (tp * pp):
                continue
            vps = [given["vp"]] if "vp" in given else (_divisors(cost.layers // pp) if pp > 1 else [1])
            for vp in vps:
                for mb in [given["micro_batch"]] if "micro_batch" in given else cost.micro_batch_choices:
                    for recompute in [given["recompute"]] if "recompute" in given else cost.recompute_choices:
                        for zero in [given["zero"]] if "zero" in given else _zero_choices(cost, template):
                            layout = Layout(dp=given.get("dp", count // (tp * pp)), tp=tp, pp=pp, vp=vp)
                            yield replace(template, layout=layout, micro_batch=mb, recompute=recompute, zero=zero,
                                          sequence_parallel=given.get("sequence_parallel", template.sequence_parallel and tp > 1),
                                          **{k: given[k] for k in ("overlap", "gather_overlap", "precision") if k in given})


def _whole_batch(plan: Plan, global_batch_size: int) -> Plan | None:
    """`plan` with each replica's share of the batch in one micro-batch (in pp of them when the
    schedule is interleaved, which runs micro-batches in groups of pp); None where it does not divide."""
    per_step = plan.layout.dp * (plan.layout.pp if plan.layout.vp > 1 else 1)
    if global_batch_size % per_step:
        return None
    return replace(plan, micro_batch=global_batch_size // per_step)


def _zero_choices(cost: WorkloadCost, template: Plan) -> list[int]:
    """The stack's ZeRO stage and FSDP; a model that shards parameters itself (embedding tables)
    keeps the rest replicated in DDP, as trainclock runs it: its dense part is small anyway."""
    return [0] if cost.sharded_parameters else sorted({template.zero, 3})


def batch_sizes(cost: WorkloadCost, plan: Plan, global_batch_size: int | None,
                convergence: ConvergenceModel | None) -> list[int]:
    """The given batch size, or for each convergence point the nearest batch the layout can run
    (whole micro-batches per replica, in groups of pp when interleaved): at or above the point,
    or below it at the top of the range."""
    if global_batch_size is not None:
        return [global_batch_size]
    if convergence is None:
        return [cost.reference_batch_size]
    unit = plan.layout.dp * plan.micro_batch * (plan.layout.pp if plan.layout.vp > 1 else 1)
    low, high = convergence.batch_range
    sizes = set()
    for point, _tokens in convergence.points:
        above, below = math.ceil(point / unit) * unit, point // unit * unit
        if above <= high:
            sizes.add(above)
        elif below >= low:
            sizes.add(below)
    return sorted(sizes)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]

