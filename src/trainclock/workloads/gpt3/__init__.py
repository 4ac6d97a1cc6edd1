"""The GPT-3 benchmark family (MLPerf Training gpt3 at 175B, plus smaller members)."""

from trainclock.workloads.gpt3.workload import GPT3Workload

WORKLOAD = GPT3Workload()
