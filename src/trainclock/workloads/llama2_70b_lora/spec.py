"""The llama2_70b_lora benchmark: every member's shape, adapters, data, hyperparameters and target.

Sources of the full size (MLPerf Training rounds 4.0-6.1, closed division), each fact once:
- [ref]   mlcommons/training llama2_70b_lora (commit aa344c7f): run_and_time.sh and README (the
          command line), scripts/utils.py (LoraConfig, the prompt template, the eval masking),
          scripts/mlperf_logging_utils.py (the log keys, samples_count = step x GBS).
- [rules] mlcommons/training_policies training_rules.adoc (commit d73e20f): target "0.925 Eval loss";
          fixed: lora_alpha 32, lora_dropout 0.1, opt_gradient_clip_norm 0.3, opt_weight_decay 1e-4,
          sequence length 8k; unconstrained: GBS, lr, training steps, warmup ratio, accumulation;
          eval "every 384 sequences ... skipping first FLOOR(0.125*global_batch_size+2) evaluations";
          progress in training samples; 10 runs per submission.
- [checker] mlperf_logging 4.1.68, compliance_checker/training_6.1.0/closed_llama2_70b_lora.yaml:
          eval_accuracy <= 0.925 with samples_count, lora_rank == 16, one each of global_batch_size,
          opt_base_learning_rate, opt_learning_rate_training_steps, opt_gradient_clip_norm,
          opt_adamw_weight_decay, gradient_accumulation_steps, lora_alpha (identical in 5.1 and 6.0;
          4.0 lacks lora_alpha). rcp_checker/training_6.1.0/rcps_llama2_70b_lora.json: BS 8/16/32 at
          lr 4e-4, BS 128 at lr 1e-3, all 1024 max steps, 20 runs each in "samples to converge".
- [llama2] Touvron et al. 2023 (Llama 2) and the HF config of Llama-2-70b: 80 layers, d 8192, 64 heads,
          8 key/value heads, FFN 28672, vocabulary 32000, RMSNorm eps 1e-5, RoPE theta 10000.
- [data]  MLCommons' preprocessed SCROLLS GovReport (scrolls_gov_report_8k: train and validation
          parquet with input_ids / attention_mask / labels, one 8192-token row per sample): 3,901
          training and 173 validation rows, as the published v4.0 logs' train_samples and
          eval_samples say (recalled, not re-read here: no log of this benchmark is in shared/).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload.cost_model import rules_rcp_table
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target
from trainclock.workloads.llama2_70b_lora.lora import LoraConfig, lora_parameter_count
from trainclock.workloads.llama2_70b_lora.model import LlamaShape

BENCHMARK = "llama2_70b_lora"
# the newest round whose closed llama2_70b_lora rules the installed mlperf_logging ships [checker]
MLPERF_ROUND = "6.1"
METRIC = "eval loss (nats/token of the summaries)"
FULL_SIZE = "llama2_70b_lora-70b"

LLAMA2_70B = LlamaShape(n_layer=80, d_model=8192, n_head=64, n_kv_head=8, d_ffn=28672, vocab_size=32000,
                        context=8192)  # [llama2]; context: the benchmark's sequence length [ref]
REFERENCE_LORA = LoraConfig(rank=16, alpha=32, dropout=0.1, target_modules=("qkv_proj", "o_proj"))  # [ref]
EVAL_EVERY_SEQUENCES = 384  # [rules]


@dataclass(frozen=True)
class LoraSpec(MemberSpec):
    shape: LlamaShape
    lora: LoraConfig
    data: str  # "scrolls" (the official parquet, --data) or "shakespeare" (the CPU tiers' offline task)
    learning_rate: float
    training_steps: int  # the cosine schedule reaches 0 here (opt_learning_rate_training_steps, max_steps)
    warmup_steps: int
    eval_every_samples: int
    eval_first_samples: int  # the first evaluation counted: the rules skip the early ones
    eval_sequences: int  # the fixed validation set
    max_samples: int  # the run stops as aborted here: training_steps x GBS, as the reference's max_steps
    weight_decay: float = 1e-4  # [rules] fixed
    gradient_clip_norm: float = 0.3  # [rules] fixed
    adam_beta1: float = 0.9  # [ref] Trainer's adamw_torch defaults
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    mlperf_benchmark: str = BENCHMARK
    # a CPU tier's base model, pretrained once by `trainclock data prepare` (the full size loads --checkpoint)
    pretrain_steps: int = 0
    pretrain_batch: int = 0
    pretrain_learning_rate: float = 0.0

    @property
    def seq_len(self) -> int:
        return self.shape.context

    def trainable_parameter_count(self) -> int:
        """The LoRA adapters' parameters (qkv_proj: d -> qkv width; o_proj: d -> d), per layer x layers."""
        s = self.shape
        widths = {"qkv_proj": (s.d_model, s.qkv_width), "o_proj": (s.d_model, s.d_model),
                  "gate_proj": (s.d_model, s.d_ffn), "up_proj": (s.d_model, s.d_ffn), "down_proj": (s.d_ffn, s.d_model)}
        return s.n_layer * lora_parameter_count([widths[m] for m in self.lora.target_modules], self.lora.rank)

    def flops_per_token(self) -> float:
        """Training FLOPs per token: forward 2N, backward through activations 2N, no weight gradients
        of the frozen base (adapters are negligible), plus attention 12*L*D*T: 4N + 12LDT."""
        full = self.shape.flops_per_token(self.seq_len)
        attention = 12 * self.shape.n_layer * self.shape.d_model * self.seq_len
        return (full - attention) * 4 / 6 + attention

    def with_batch(self, global_batch_size: int) -> "LoraSpec":
        """The spec at another global batch size: the evaluation cadence follows the rules'
        formula; the full size takes the RCP's learning rate for that batch (the nearest RCP)."""
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of sequences, got {global_batch_size}")
        spec = replace(self, global_batch_size=global_batch_size,
                       micro_batch_size=min(self.micro_batch_size, global_batch_size))
        if self.data != "scrolls":
            return spec
        rcp = nearest_rcp_hyperparameters(global_batch_size)
        every, first = mlperf_eval_cadence(global_batch_size)
        return replace(spec, learning_rate=rcp["opt_base_learning_rate"], training_steps=rcp["max_steps"],
                       eval_every_samples=every, eval_first_samples=first,
                       max_samples=rcp["max_steps"] * global_batch_size)


def mlperf_eval_cadence(global_batch_size: int) -> tuple[int, int]:
    """(every, first) in samples [rules]: every 384 sequences (rounded up to whole steps), the first
    FLOOR(0.125*GBS + 2) evaluations skipped."""
    every = math.ceil(EVAL_EVERY_SEQUENCES / global_batch_size) * global_batch_size
    skipped = math.floor(0.125 * global_batch_size + 2)
    return every, (skipped + 1) * every


def nearest_rcp_hyperparameters(global_batch_size: int) -> dict:
    """The hyperparameters of the round's reference convergence points at the nearest batch size."""
    table = rules_rcp_table(BENCHMARK, MLPERF_ROUND)
    entry = min(table, key=lambda e: (abs(math.log(e["BS"] / global_batch_size)), e["BS"]))
    return entry["Hyperparams"]


def _full_size() -> LoraSpec:
    gbs = 8  # [ref] 8 GPUs x per_device_train_batch_size 1 x gradient_accumulation_steps 1
    every, first = mlperf_eval_cadence(gbs)
    return LoraSpec(
        name=FULL_SIZE,
        shape=LLAMA2_70B,
        lora=REFERENCE_LORA,
        data="scrolls",
        global_batch_size=gbs,
        micro_batch_size=1,
        learning_rate=4e-4,  # [ref], the RCP at BS 8
        training_steps=1024,  # [ref] max_steps
        warmup_steps=0,  # [ref] warmup_ratio 0
        eval_every_samples=every,
        eval_first_samples=first,
        eval_sequences=173,  # [data]
        **rules_target([(METRIC, "lower", 0.925)], f"Training v{MLPERF_ROUND} closed llama2_70b_lora rules"),  # [checker]
        max_samples=1024 * gbs,
    )


def _cpu_member(name: str, **fields) -> LoraSpec:
    return LoraSpec(name=name, data="shakespeare", **recorded_target(__package__, name, [(METRIC, "lower")]), **fields)


# the CPU tiers: a byte-level Llama (256 bytes + end of text), pretrained on the plays, then adapted
BYTE_VOCAB = 257


def _members() -> list[LoraSpec]:
    tiny = _cpu_member(
        "llama2_70b_lora-tiny",
        shape=LlamaShape(n_layer=3, d_model=96, n_head=4, n_kv_head=2, d_ffn=256, vocab_size=BYTE_VOCAB, context=256),
        lora=REFERENCE_LORA,
        global_batch_size=8,
        micro_batch_size=8,
        learning_rate=1e-2,
        training_steps=80,
        warmup_steps=0,
        eval_every_samples=64,
        eval_first_samples=64,
        eval_sequences=64,
        max_samples=80 * 8,
        pretrain_steps=300,
        pretrain_batch=8,
        pretrain_learning_rate=3e-3,
    )
    return [tiny, _full_size()]


MEMBERS: MemberSet[LoraSpec] = MemberSet(BENCHMARK, __package__, _members())
get_member = MEMBERS.member
