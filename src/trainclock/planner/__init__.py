"""The planner: predicts time-to-train, memory and cost of a benchmark member on a cluster,
calibrated on published MLPerf results and on trainclock's own runs.

- model/: the prediction itself. workload_view (the member's cost model, from the registry) ->
  parallel_plan (a Layout as `trainclock run` takes it, plus micro-batch, recomputation, sharding,
  precision; feasibility: whether it can run) -> step_time (with collectives), memory (per step,
  per accelerator) -> convergence (progress to target) -> predict (time-to-train); search (the best
  layout), published_layouts (how the submissions ran), sensitivity, run_cost.
- calibration/: what the model cannot know from datasheets, fitted by one of three sources, tried
  in order (calibration/__init__.py): own_runs (this CPU's stored runs), published_scores (every
  benchmark's published scores), result_files (a benchmark's results table and logs per
  software stack: submissions.toml's benchmark); mlperf_data reads the published files.
- validation/: how well each calibration predicts what it was not fitted on (result_file_checks,
  score_checks; own_runs checks its runs itself).
- output/: terminal tables (tables, score_tables, own_run_tables), the scaling curve
  (scaling_curve), and the `trainclock run` line of a plan (run_command).

plan.py is the entry: a Planner turns a CLI question into a prediction."""
