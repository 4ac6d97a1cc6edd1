"""The planner's one way to a workload: its cost model, found through the workload registry by a
member name (<benchmark>-<size>) or an MLPerf benchmark key (its full-size member)."""

from __future__ import annotations

from trainclock.errors import DataError, UsageError
from trainclock.workload import registry
from trainclock.workload.cost_model import WorkloadCost


def cost_model(name: str) -> WorkloadCost:
    workload, member = registry.find(name)  # UsageError for unknown names
    cost = workload.cost(member)
    if cost is None:
        raise UsageError(f"{member} has no cost model yet (workloads/{workload.key}/cost.py), so the planner "
                         f"cannot predict it; `trainclock run {member}` measures it instead")
    if not cost.sample_work_cv >= 0:  # checked once here: step_time charges it on every step
        raise DataError(f"{member}'s cost model declares sample_work_cv {cost.sample_work_cv}; it must be 0 or "
                        f"more (workloads/{workload.key}/cost.py)")
    return cost

