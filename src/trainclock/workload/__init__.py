"""The workload interface every benchmark stands on: the protocol and its bases (base), how the
benchmarks are found (registry), batches and their plan across ranks (batches, batch_plan), the
planner's cost model of a member (cost_model), a tier's target evidence and the rule it must pass
(evidence, tier_rule). Benchmarks themselves live in trainclock.workloads, one folder each."""
