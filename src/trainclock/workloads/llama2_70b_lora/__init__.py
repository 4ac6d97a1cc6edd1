"""MLPerf Training llama2_70b_lora (rounds 4.0 and later): Llama 2 70B fine-tuned with LoRA on SCROLLS
GovReport to an eval loss of 0.925, plus byte-level CPU tiers on an offline summarisation task."""

from trainclock.workloads.llama2_70b_lora.workload import LlamaLoraWorkload

WORKLOAD = LlamaLoraWorkload()
