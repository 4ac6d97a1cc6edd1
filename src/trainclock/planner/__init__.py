"""The planner: predicts time-to-train, memory and cost of a benchmark member on a cluster,
calibrated on published MLPerf results.

workload (the member's cost model, from the registry: workload/cost_model.py) -> plan (a Layout as
`trainclock run` takes it, plus micro-batch, recomputation, sharding, precision) -> step_time,
memory (per step, per accelerator) -> convergence (progress to target) -> predict (time-to-train)
-> calibrate (fit on the MLPerf table and logs, leave-one-out, extrapolation) -> search (best
layout), sweep (scaling curve), cost; planning turns a CLI question into a prediction, run_command
the `trainclock run` line for it, tables prints them, validation assembles --validate."""
