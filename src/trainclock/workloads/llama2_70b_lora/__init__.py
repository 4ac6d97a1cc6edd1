"""MLPerf Training llama2_70b_lora (rounds 4.0 and later): Llama 2 70B fine-tuned with LoRA on SCROLLS
GovReport to an eval loss of 0.925, plus byte-level CPU tiers on an offline summarisation task."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("pyarrow", "safetensors")  # SCROLLS parquet, the base model's checkpoint

from trainclock.workloads.llama2_70b_lora.workload import LlamaLoraWorkload

WORKLOAD = LlamaLoraWorkload()
