"""Whether a plan can train a workload on N accelerators at a global batch size: divisibility of
what tensor and pipeline parallelism split, whole micro-batches, the interleaved schedule's groups."""

from __future__ import annotations

from trainclock.errors import UsageError
from trainclock.planner.model.parallel_plan import Plan
from trainclock.workload.cost_model import WorkloadCost


def layout_problems(plan: Plan, cost: WorkloadCost, count: int, global_batch_size: int) -> list[str]:
    """Why `plan` cannot train `cost`'s model on `count` accelerators at this batch size (empty: it
    can). Each reason reads "<constraint>: <details>"; the search counts rejections by constraint."""
    problems = []
    layout = plan.layout
    if layout.world_size != count:
        problems.append(f"accelerator count: tp x pp x dp = {layout.tp} x {layout.pp} x {layout.dp} "
                        f"= {layout.world_size}, not {count}")
    if cost.tensor_parallel_units % layout.tp:
        problems.append(f"tensor parallel: tp={layout.tp} does not divide {cost.name}'s {cost.tensor_parallel_units} "
                        f"{cost.tensor_parallel_unit}")
    if cost.layers % (layout.pp * layout.vp):
        problems.append(f"layers: pp x vp = {layout.pp} x {layout.vp} does not divide the {cost.layers} layers")
    if layout.vp > 1 and layout.pp == 1:
        problems.append("interleaving: vp > 1 needs pp > 1")
    if plan.sequence_parallel and layout.tp == 1:
        problems.append("sequence parallel: sp needs tp > 1")
    if global_batch_size % (layout.dp * plan.micro_batch):
        problems.append(f"batch: global batch {global_batch_size} is not a multiple of "
                        f"dp x mb = {layout.dp} x {plan.micro_batch}")
    elif layout.vp > 1 and plan.micro_batches(global_batch_size) % layout.pp:
        # Megatron's interleaved schedule runs micro-batches in groups of pp
        problems.append(f"interleaving: the {plan.micro_batches(global_batch_size)} micro-batches per step "
                        f"are not a multiple of pp={layout.pp}")
    return problems


def require_valid(plan: Plan, cost: WorkloadCost, count: int, global_batch_size: int) -> None:
    problems = layout_problems(plan, cost, count, global_batch_size)
    if problems:
        raise UsageError(f"layout {plan.describe()} is not valid ({problems[0]}); change --layout, --count or --gbs")
