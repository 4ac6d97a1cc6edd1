"""The GPT-3 benchmark family (MLPerf Training gpt3 at 175B, plus smaller members)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("tokenizers",)  # the tiers' BPE vocabulary

from trainclock.workloads.gpt3.workload import GPT3Workload

WORKLOAD = GPT3Workload()
