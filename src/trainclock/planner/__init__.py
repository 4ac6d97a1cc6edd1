"""The planner: predicts time-to-train, memory and cost of a GPT-3 member on a cluster, calibrated
on published MLPerf results.

hardware (catalogue) -> layout -> step_time, memory (per step, per accelerator) -> convergence
(tokens to target) -> predict (time-to-train) -> calibrate (fit on the MLPerf table and logs,
leave-one-out, extrapolation) -> search (best layout), sweep (scaling curve), cost; planning
turns a CLI question into a prediction, tables prints them, validation assembles --validate."""
