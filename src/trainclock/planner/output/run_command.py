"""The `trainclock run` command line of a prediction's plan, and what in the plan that command
cannot (yet) set, so that a user who runs it knows what will differ from the prediction."""

from __future__ import annotations

import shlex

from trainclock.planner.model.predict import Prediction

RUN_PRECISIONS = ("bf16", "fp32")  # what `trainclock run --precision` takes besides auto


def run_command(p: Prediction) -> tuple[str, str]:
    """(the command, what it leaves out: "" when it is the whole plan)."""
    plan = p.plan
    args = ["trainclock", "run", p.cost.name, *plan.layout.run_flags(p.accelerator.accelerators_per_node),
            "--gbs", str(p.global_batch_size), "--micro-batch", str(plan.micro_batch)]
    if plan.precision in RUN_PRECISIONS:
        args += ["--precision", plan.precision]
    if plan.recompute == "full":
        args.append("--activation-checkpointing")  # recomputes each whole block, as "full" does
    return shlex.join(args), _not_run(p)


def _not_run(p: Prediction) -> str:
    plan = p.plan
    missing = []
    if plan.precision not in RUN_PRECISIONS:
        missing.append(f"{plan.precision} matmuls")
    if plan.sequence_parallel:
        missing.append("sequence parallelism")
    if plan.recompute == "selective":
        missing.append(f"{plan.recompute} recomputation")
    if plan.zero in (1, 2) and plan.layout.dp > 1:
        missing.append(f"ZeRO-{plan.zero} sharding short of FSDP")
    return f"not set by trainclock run: {', '.join(missing)}" if missing else ""
