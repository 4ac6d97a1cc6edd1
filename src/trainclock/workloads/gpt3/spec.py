"""The GPT-3 benchmark family: every member's shape, data, hyperparameters and quality target.

Paper members follow the GPT-3 paper (Brown et al. 2020, Table 2.1: layers, width, heads,
batch size in tokens, learning rate). gpt3-175b follows the MLPerf Training GPT-3 benchmark
(closed division, rounds 3.0/3.1): it starts from a checkpoint, trains on C4 and stops at
validation log perplexity <= 2.69. CPU members' targets come from our own reference runs;
the evidence sits in targets/ next to this file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload.base import QualityTarget, TargetSource
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target
from trainclock.workloads.gpt3.model import GPTShape

MLPERF_ROUND = "3.1"  # the MLPerf Training round whose closed rules and reference points this benchmark follows

METRIC = "validation log perplexity (nats/token)"

GPT3_VOCAB = 50257
MLPERF_REFERENCE_BATCH = 1536  # sequences; MLPerf scales warmup/decay/checkpoint step from it


@dataclass(frozen=True)
class GPT3Spec(MemberSpec):
    shape: GPTShape
    corpus: str  # default data source, see data.py
    learning_rate: float
    end_learning_rate: float
    warmup_steps: int
    decay_steps: int
    eval_every_samples: int  # sequences between evaluations
    eval_sequences: int  # size of the fixed validation set, in sequences
    max_samples: int  # the run stops as aborted after this many training sequences
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    adam_eps: float = 1e-8
    weight_decay: float = 0.1
    gradient_clip_norm: float = 1.0
    init_checkpoint_step: int = 0  # MLPerf gpt3 starts from a checkpoint at this step
    mlperf_benchmark: str = "gpt3"
    fp8: bool = False  # the blocks' matmuls in FP8 through torchao (--fp8, fp8.py); bf16 by default

    @property
    def seq_len(self) -> int:
        return self.shape.context

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_size * self.seq_len

    def with_batch(self, global_batch_size: int) -> "GPT3Spec":
        """The spec at another global batch size, with the step counts that MLPerf scales
        with it (warmup, decay and checkpoint steps stay fixed in samples)."""
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of sequences, got {global_batch_size}")
        ratio = self.global_batch_size / global_batch_size
        return replace(
            self,
            global_batch_size=global_batch_size,
            micro_batch_size=min(self.micro_batch_size, global_batch_size),
            warmup_steps=max(1, round(self.warmup_steps * ratio)),
            decay_steps=max(1, round(self.decay_steps * ratio)),
            init_checkpoint_step=round(self.init_checkpoint_step * ratio),
        )

    def training_memory_bytes(self, micro_batch_size: int | None = None, shards: int = 1) -> int:
        """Estimated memory to train on one process: fp32 weights, gradients and two Adam
        moments (16 bytes/parameter) plus activations of one micro-batch (about
        34*T*D + 5*H*T^2 bytes per layer and sequence in bf16, Korthikanti et al. 2022)."""
        s, mb = self.shape, micro_batch_size or self.micro_batch_size
        T = s.context
        activations = s.n_layer * mb * (34 * T * s.d_model + 5 * s.n_head * T * T)
        logits = mb * T * s.vocab_size * 4 * 2  # fp32 logits and their gradient
        return 16 * s.parameter_count() // shards + activations + logits


def _paper_member(name: str, n_layer: int, d_model: int, n_head: int, batch_mtokens: float, lr: float) -> GPT3Spec:
    shape = GPTShape(n_layer=n_layer, d_model=d_model, n_head=n_head, context=2048, vocab_size=GPT3_VOCAB)
    gbs = round(batch_mtokens * 2**20 / 2048)  # the paper's "0.5M" tokens is 2^19 = 256 sequences
    return GPT3Spec(
        name=name,
        shape=shape,
        corpus="c4",
        global_batch_size=gbs,
        micro_batch_size=1,
        learning_rate=lr,
        end_learning_rate=lr / 10,
        # GPT-3 paper: warmup over the first 375M tokens, cosine decay over 260B tokens.
        warmup_steps=max(1, round(375e6 / (gbs * 2048))),
        decay_steps=round(260e9 / (gbs * 2048)),
        eval_every_samples=24576,
        eval_sequences=5659,  # MLPerf's C4 validation subset: 11,590,004 tokens / 2048
        quality=(QualityTarget(METRIC, _estimated_target(shape), "lower"),),
        target_source=TargetSource.ESTIMATED,
        target_note="Chinchilla parametric law (Hoffmann et al. 2022, A=406.4, alpha=0.34) anchored at the "
        "MLPerf 175B target 2.69; not yet measured",
        max_samples=round(300e9 / 2048),
    )


def _estimated_target(shape: GPTShape) -> float:
    n_175b = GPTShape(96, 12288, 96, 2048, GPT3_VOCAB).parameter_count(include_positions=False)
    n = shape.parameter_count(include_positions=False)
    return round(2.69 + 406.4 * (n ** -0.34 - n_175b ** -0.34), 3)


def _gpt3_175b() -> GPT3Spec:
    return GPT3Spec(
        name="gpt3-175b",
        shape=GPTShape(n_layer=96, d_model=12288, n_head=96, context=2048, vocab_size=GPT3_VOCAB),
        corpus="c4",
        global_batch_size=MLPERF_REFERENCE_BATCH,
        micro_batch_size=1,
        learning_rate=2e-5,
        end_learning_rate=2e-6,
        warmup_steps=265,
        decay_steps=108600,
        eval_every_samples=24576,
        eval_sequences=5659,
        **rules_target([(METRIC, "lower", 2.69)], "Training v3.0/v3.1 closed gpt3 rules"),
        max_samples=1_200_000,  # about 2.5x the reference convergence point at batch 1536
        init_checkpoint_step=4000,
    )


def _cpu_member(name: str, shape: GPTShape, **hyper) -> GPT3Spec:
    target = recorded_target(__package__, name, [(METRIC, "lower")])
    return GPT3Spec(name=name, shape=shape, corpus="shakespeare", **target, **hyper)


def _members() -> list[GPT3Spec]:
    cpu = [
        _cpu_member(
            "gpt3-tiny",
            GPTShape(n_layer=4, d_model=128, n_head=4, context=128, vocab_size=1024),
            global_batch_size=32,
            micro_batch_size=32,
            learning_rate=3e-3,
            end_learning_rate=3e-4,
            warmup_steps=20,
            decay_steps=200,
            eval_every_samples=256,  # 11 evaluations before the median crossing: the tier rule wants 4 or more
            eval_sequences=64,  # what the tests' small corpora hold; evaluation noise is 1% of the target's gain
            max_samples=40_000,
        ),
        _cpu_member(
            "gpt3-mini",
            GPTShape(n_layer=6, d_model=384, n_head=6, context=256, vocab_size=2048),
            global_batch_size=16,
            micro_batch_size=16,
            learning_rate=2e-3,
            end_learning_rate=2e-4,
            warmup_steps=20,
            decay_steps=220,
            eval_every_samples=192,  # 6 evaluations before the median crossing: the tier rule wants 4 or more
            eval_sequences=64,
            max_samples=12_000,
        ),
    ]
    paper = [
        _paper_member("gpt3-125m", 12, 768, 12, 0.5, 6.0e-4),
        _paper_member("gpt3-350m", 24, 1024, 16, 0.5, 3.0e-4),
        _paper_member("gpt3-760m", 24, 1536, 16, 0.5, 2.5e-4),
        # The paper prints 24 heads of 128 for 1.3B, which does not divide d_model 2048; 16 heads of
        # 128 do (as GPT-Neo 1.3B uses). The head count does not change the parameter count.
        _paper_member("gpt3-1.3b", 24, 2048, 16, 1, 2.0e-4),
        _paper_member("gpt3-2.7b", 32, 2560, 32, 1, 1.6e-4),
        _paper_member("gpt3-6.7b", 32, 4096, 32, 2, 1.2e-4),
        # The paper prints d_model 5140 for 13B, but also 40 heads of 128 = 5120: 5120 is the real width.
        _paper_member("gpt3-13b", 40, 5120, 40, 2, 1.0e-4),
    ]
    return [*cpu, *paper, _gpt3_175b()]


MEMBERS: MemberSet[GPT3Spec] = MemberSet("GPT-3", __package__, _members())
get_member = MEMBERS.member
target_evidence = MEMBERS.evidence
