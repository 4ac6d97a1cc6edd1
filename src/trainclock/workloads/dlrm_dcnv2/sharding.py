"""How a run lays the 26 tables over its processes (--embedding-sharding), and the plan it builds
(distributed/table_plan.py), which the memory check and the cost model read too. No torch here."""

from __future__ import annotations

from trainclock.distributed.layout import Layout
from trainclock.distributed.table_plan import TablePlan, plan_tables
from trainclock.errors import UsageError
from trainclock.workloads.dlrm_dcnv2.spec import DlrmSpec

SHARDINGS = ("auto", "table", "row", "none")


def embedding_sharding(choice: str | None, layout: Layout, tables: int) -> str:
    """The layout of the tables: the user's choice, checked, or the default: the planner's ("auto":
    the largest tables row-wise, the others whole, the tiny ones replicated) on 2 or more
    processes; one process holds them all ("none")."""
    if layout.fsdp and choice in ("auto", "table", "row"):
        raise UsageError("--embedding-sharding shards the tables itself and keeps the dense part in DDP; drop --fsdp")
    if choice is None:
        return "none" if layout.dp == 1 or layout.fsdp else "auto"
    if choice != "none" and layout.dp == 1:
        raise UsageError(f"--embedding-sharding {choice} splits the tables over processes, but this run has one; "
                         "add --nproc 2 or more, or drop the flag")
    if choice == "table" and tables < layout.dp:
        raise UsageError(f"--embedding-sharding table over {layout.dp} processes leaves some without one of the "
                         f"{tables} tables; use --embedding-sharding auto or row")
    return choice


def table_plan(spec: DlrmSpec, ranks: int) -> TablePlan | None:
    """Where each table lives on `ranks` data-parallel ranks (None: every rank holds every table)."""
    if spec.embedding_sharding == "none":
        return None
    return plan_tables(spec.embedding_sharding, spec.shape.rows, ranks, max(1, spec.global_batch_size // ranks))
