"""The BERT benchmark family: every member's shape, data, hyperparameters and quality target.

bert-large is MLPerf Training v3.1 closed `bert`: BERT-Large (24 layers, width 1024, 16 heads,
vocabulary 30522; 336.2M parameters with the pre-training heads) on Wikipedia at sequence length
512 with at most 76 masked positions, started from the reference phase-1 checkpoint, trained with
LAMB to masked-LM accuracy 0.720 on 10,000 eval samples. Its hyperparameters at each batch size
are the reference convergence points (RCPs) of the rules. The CPU tiers are the same code path at
sequence 128 on English text, started from a phase-1 checkpoint made during data preparation;
their targets come from reference runs whose evidence sits in targets/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload.cost_model import rcp_hyperparameters as rules_hyperparameters
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target
from trainclock.workloads.bert.metric import METRIC

MLPERF_ROUND = "3.1"  # the MLPerf Training round whose closed rules and reference points this benchmark follows

MLPERF_EVAL_SAMPLES = 10_000


@dataclass(frozen=True)
class BertShape:
    n_layer: int
    hidden: int
    n_head: int
    intermediate: int
    vocab_size: int
    max_positions: int = 512

    def parameter_count(self) -> int:
        """BertForPreTraining's parameters (decoder weight tied to the word embeddings)."""
        h, i, v = self.hidden, self.intermediate, self.vocab_size
        embeddings = (v + self.max_positions + 2) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h
        pooler = h * h + h
        heads = (h * h + h) + 2 * h + v + (2 * h + 2)
        return embeddings + self.n_layer * layer + pooler + heads

    def flops_per_sample(self, seq_len: int, predictions: int) -> float:
        """Training FLOPs (3x forward) of one sequence: the encoder's matmuls and attention over
        every token, the masked-LM head over the masked positions only (as the reference gathers)."""
        h = self.hidden
        encoder = self.n_layer * (2 * (4 * h * h + 2 * h * self.intermediate) + 4 * seq_len * h) * seq_len
        head = predictions * 2 * (h * h + h * self.vocab_size) + 2 * h * h
        return 3.0 * (encoder + head)


@dataclass(frozen=True)
class BertSpec(MemberSpec):
    shape: BertShape
    corpus: str  # "wikipedia" (official format, --data) or a CPU tier's text source
    seq_len: int
    max_predictions: int
    learning_rate: float
    training_steps: int  # opt_learning_rate_training_steps: the poly decay reaches 0 here
    warmup_steps: int
    start_warmup_step: int
    beta1: float
    beta2: float
    weight_decay: float
    eval_every_samples: int
    eval_samples: int
    max_samples: int
    eps: float = 1e-6
    dropout: float = 0.1
    # CPU tiers: the untimed phase-1 pre-training from random init that makes their start checkpoint
    phase1_steps: int = 0
    phase1_learning_rate: float = 0.0
    train_instances: int = 0
    mlperf_benchmark: str = "bert"
    # train on packed rows (data/packing.py): each micro-batch's sequences, the same as unpacked, several
    # a row, so fewer tokens computed where sequences are short (Wikipedia at 512: about half padding,
    # 1.85 sequences a row, ~1.9x less compute a step). Off for the CPU tiers: their text fills 94% of
    # 128, no row is saved after bucket padding, and a step is 2-8% slower (benchmarks/bert_packed_step.py)
    pack_sequences: bool = False

    def with_batch(self, global_batch_size: int) -> "BertSpec":
        """The spec at another global batch size: bert-large takes the rules' reference
        hyperparameters for that batch (its RCP); a CPU tier keeps its rate and counts in samples."""
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of sequences, got {global_batch_size}")
        if self.name == "bert-large":
            return replace(self, **rcp_hyperparameters(global_batch_size),
                           micro_batch_size=min(self.micro_batch_size, global_batch_size))
        ratio = self.global_batch_size / global_batch_size
        return replace(self, global_batch_size=global_batch_size,
                       micro_batch_size=min(self.micro_batch_size, global_batch_size),
                       training_steps=max(1, round(self.training_steps * ratio)),
                       warmup_steps=round(self.warmup_steps * ratio))


def mlperf_eval_every(global_batch_size: int) -> int:
    """The rules' evaluation interval in samples: floor(0.05 * (230.23 * GBS + 3e6) / 25000) * 25000."""
    return math.floor(0.05 * (230.23 * global_batch_size + 3_000_000) / 25_000) * 25_000


def rcp_hyperparameters(global_batch_size: int) -> dict:
    """The reference hyperparameters of the rules at this batch size (MLPerf v3.1 bert RCPs)."""
    hp = rules_hyperparameters("bert", MLPERF_ROUND, global_batch_size, "bert-large")
    steps = int(hp["opt_learning_rate_training_steps"])
    return {
        "global_batch_size": global_batch_size,
        "learning_rate": hp["opt_base_learning_rate"],
        "training_steps": steps,
        "warmup_steps": int(hp["num_warmup_steps"]),
        "start_warmup_step": int(hp["start_warmup_step"]),
        "beta1": hp["opt_lamb_beta_1"],
        "beta2": hp["opt_lamb_beta_2"],
        "weight_decay": hp["opt_lamb_weight_decay_rate"],
        "eps": hp["opt_epsilon"],
        "eval_every_samples": mlperf_eval_every(global_batch_size),
        "max_samples": steps * global_batch_size,
    }


def _bert_large() -> BertSpec:
    return BertSpec(
        name="bert-large",
        shape=BertShape(n_layer=24, hidden=1024, n_head=16, intermediate=4096, vocab_size=30522),
        corpus="wikipedia",
        seq_len=512,
        max_predictions=76,
        micro_batch_size=8,
        pack_sequences=True,
        eval_samples=MLPERF_EVAL_SAMPLES,
        **rules_target([(METRIC, "higher", 0.720)], f"Training v{MLPERF_ROUND} closed bert rules"),
        **rcp_hyperparameters(448),  # the reference's batch (TPU-v4-32, Habana's hyperparameter set)
    )


def _cpu_member(name: str, shape: BertShape, **hyper) -> BertSpec:
    return BertSpec(name=name, shape=shape, corpus="shakespeare", seq_len=128, max_predictions=20,
                    **recorded_target(__package__, name, [(METRIC, "higher")]),
                    beta1=0.9, beta2=0.999, weight_decay=0.01, warmup_steps=0, start_warmup_step=0,
                    dropout=0.0,  # short runs: no regularisation needed, and 1 and N processes match exactly
                    **hyper)


def _members() -> list[BertSpec]:
    tiny = _cpu_member(
        "bert-tiny", BertShape(n_layer=2, hidden=128, n_head=2, intermediate=512, vocab_size=2048, max_positions=128),
        # the whole poly decay (200 steps) inside the budget, so the curve flattens where the rate ends;
        # 2,048 evaluation sequences (40,960 masked tokens): with 512, evaluation-to-evaluation noise
        # was 0.17 of the gain to the target, now under 0.1; LAMB at 0.03 gains 0.03 where 0.01 gained
        # 0.022 and 0.003 gained 0.01 in the same 6,400 sequences
        global_batch_size=32, micro_batch_size=32, learning_rate=3e-2, training_steps=200,
        eval_every_samples=640, eval_samples=2_048, max_samples=6_400,
        phase1_steps=300, phase1_learning_rate=2e-3, train_instances=20_000)
    mini = _cpu_member(
        "bert-mini", BertShape(n_layer=4, hidden=256, n_head=4, intermediate=1024, vocab_size=4096, max_positions=128),
        # the poly decay over 400 steps, the whole budget: over 200 (6,400 sequences) the curve still climbed
        # at the end (last/mean gain 0.91), over 400 it flattens; LAMB 3e-2 (tiny's) gained 0.019 in 6,400
        # sequences where 1e-2 gained 0.025. 2,048 evaluation sequences, as tiny's
        global_batch_size=32, micro_batch_size=32, learning_rate=1e-2, training_steps=400,
        eval_every_samples=1_280, eval_samples=2_048, max_samples=12_800,
        phase1_steps=300, phase1_learning_rate=1e-3, train_instances=20_000)
    return [tiny, mini, _bert_large()]


MEMBERS: MemberSet[BertSpec] = MemberSet("BERT", __package__, _members())
get_member = MEMBERS.member
target_evidence = MEMBERS.evidence
