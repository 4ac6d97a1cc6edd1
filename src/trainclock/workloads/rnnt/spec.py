"""The RNN-T benchmark family: every member's network, data, hyperparameters and quality target.

rnnt-librispeech is MLPerf Training v3.1 closed `rnnt`: the reference network (49.0M parameters)
on LibriSpeech 960 h (utterances up to 16.7 s) with a 1023-piece sentencepiece unigram vocabulary,
LAMB (eps 1e-9, weight decay 1e-3, clip norm 1) with the rules' reference hyperparameters (RCPs)
for the global batch (at 1024: rate 0.007447, 3 warmup and 17 hold epochs then gamma 0.9037 per
epoch, beta2 0.999, EMA 0.992, weights scaled by 0.5), one duration bucket, SpecAugment and
speed perturbation with the rules' values, evaluation of dev-clean
(2,703 utterances) every epoch by greedy decoding with the EMA weights (at most 300 pieces), to WER
0.058 within 100 epochs. The CPU tiers are the same code path on espeak-ng speech
(data/synthetic.py) with a narrower, shallower network and a small vocabulary; their targets come
from reference runs whose evidence sits in targets/."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload.cost_model import rcp_hyperparameters as rules_hyperparameters
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target
from trainclock.workloads.rnnt.features import FeatureConfig
from trainclock.workloads.rnnt.metric import METRIC
from trainclock.workloads.rnnt.model import RNNTConfig, parameter_count

MLPERF_ROUND = "3.1"  # the MLPerf Training round whose closed rules and reference points this benchmark follows

DEV_CLEAN_UTTERANCES = 2703
LIBRISPEECH_960_UTTERANCES = 281_241  # train-clean-100 + train-clean-360 + train-other-500


@dataclass(frozen=True)
class RnntSpec(MemberSpec):
    model: RNNTConfig
    dataset: str  # "librispeech" (official, --data) or "synthetic" (espeak-ng, a CPU tier)
    learning_rate: float
    warmup_epochs: float
    hold_epochs: float
    exp_gamma: float
    epochs: int  # the run stops as aborted after this many
    eval_every_epochs: float
    ema: float = 0.999
    beta1: float = 0.9
    beta2: float = 0.999
    max_duration: float = 16.7
    buckets: int = 1
    max_symbols: int = 300
    eval_batch: int = 16
    train_utterances: int = LIBRISPEECH_960_UTTERANCES  # tiers: generated; full size: nominal (the data says)
    eval_utterances: int = DEV_CLEAN_UTTERANCES
    mean_duration: float = 12.3  # seconds per training utterance (the planner's FLOPs)
    mean_pieces: float = 45.0  # sentencepiece pieces per training transcript
    features: FeatureConfig = FeatureConfig()
    mlperf_benchmark: str = "rnnt"

    @property
    def eval_every_samples(self) -> int:
        return max(1, int(self.eval_every_epochs * self.train_utterances))

    def parameter_count(self) -> int:
        return parameter_count(self.model)

    def flops_per_sample(self, duration: float | None = None, pieces: float | None = None) -> float:
        """Training FLOPs (forward + backward, 1:2) of one utterance of mean length: the LSTMs'
        and the joint's matrix products (2 per multiply-add), per input frame, piece and lattice point."""
        c = self.model
        frames = (duration or self.mean_duration) * 100 / self.features.subsampling
        enc_frames = frames / c.stack_time
        u1 = (pieces or self.mean_pieces) + 1
        lstm = lambda i, h, n: 4 * h * (i + h) + (n - 1) * 4 * h * 2 * h  # noqa: E731
        forward = (frames * lstm(c.in_features, c.enc_hidden, c.enc_pre_layers)
                   + enc_frames * lstm(c.stack_time * c.enc_hidden, c.enc_hidden, c.enc_post_layers)
                   + u1 * lstm(c.pred_hidden, c.pred_hidden, c.pred_layers)
                   + enc_frames * c.enc_hidden * c.joint_hidden + u1 * c.pred_hidden * c.joint_hidden
                   + enc_frames * u1 * c.joint_hidden * (c.vocab + 1))
        return 3.0 * 2.0 * forward

    def with_batch(self, global_batch_size: int) -> "RnntSpec":
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of utterances, got {global_batch_size}")
        micro = min(self.micro_batch_size, global_batch_size)
        if self.dataset == "librispeech":
            return replace(self, **rcp_hyperparameters(self, global_batch_size), micro_batch_size=micro)
        return replace(self, global_batch_size=global_batch_size, micro_batch_size=micro)


def rcp_hyperparameters(spec: RnntSpec, global_batch_size: int) -> dict:
    """The reference hyperparameters of the rules at this batch size (MLPerf v3.1 rnnt RCPs)."""
    hp = rules_hyperparameters("rnnt", MLPERF_ROUND, global_batch_size, "rnnt-librispeech")
    return {"global_batch_size": global_batch_size, "learning_rate": hp["opt_base_learning_rate"],
            "warmup_epochs": hp["opt_learning_rate_warmup_epochs"],
            "hold_epochs": hp["opt_lamb_learning_rate_hold_epochs"],
            "exp_gamma": hp["opt_lamb_learning_rate_decay_poly_power"], "beta1": hp["opt_lamb_beta_1"],
            "beta2": hp["opt_lamb_beta_2"], "ema": hp["model_eva_ema_factor"],  # sic: the RCP files spell it so
            "model": replace(spec.model, weights_init_scale=hp["model_weights_initialization_scale"])}


def _librispeech() -> RnntSpec:
    # the reference's train.sh values, then the rules' RCP hyperparameters at its batch of 1024
    # micro-batch 128: a rank's whole share on 8 GPUs, one micro-batch (NVIDIA and Dell run 192 per GPU at
    # 1,536, 20.3 GB per rank in the dry run); a 16-utterance micro-batch left the GPU mostly idle
    base = RnntSpec(name="rnnt-librispeech", model=RNNTConfig(), dataset="librispeech", global_batch_size=1024,
                    micro_batch_size=128, learning_rate=0.004, warmup_epochs=6, hold_epochs=40, exp_gamma=0.935,
                    epochs=100, eval_every_epochs=1,
                    **rules_target([(METRIC, "lower", 0.058)], f"Training v{MLPERF_ROUND} closed rnnt rules"))
    return base.with_batch(1024)


# the tiers' utterances are 1-5 words (about 40 stacked frames): the rules' 10 time masks of up to
# 3% each would hide a quarter of a word's frames; one frequency mask and no time masks learn
# several times faster on the tiers' 400-1,200 utterances (open division: the tiers' own values)
TIER_FEATURES = FeatureConfig(freq_masks=1, time_masks=0)


def _tier(name: str, **fields) -> RnntSpec:
    return RnntSpec(name=name, dataset="synthetic", **recorded_target(__package__, name, [(METRIC, "lower")]), ema=0.9, features=TIER_FEATURES,
                    max_duration=16.7, buckets=2, mean_duration=1.25, mean_pieces=5.0, **fields)


def _members() -> list[RnntSpec]:
    tiny = _tier("rnnt-tiny", model=RNNTConfig(vocab=48, enc_hidden=96, enc_pre_layers=1, enc_post_layers=1,
                                                  pred_hidden=64, pred_layers=1, joint_hidden=64, joint_chunk=32,
                                                  # no dropout: 2 processes then train the very curve of 1
                                                  enc_dropout=0.0, pred_dropout=0.0, joint_dropout=0.0),
                 # the rate decays by 0.6 an epoch after 6,000 utterances: held there, WER jumped between 0.6
                 # and 1.2 (at 0.02); at 0.01 every seed's WER falls without a jump to its plateau (0.18-0.33)
                 global_batch_size=16, micro_batch_size=16, learning_rate=0.01, warmup_epochs=0.5, hold_epochs=4.5,
                 exp_gamma=0.6, epochs=15, eval_every_epochs=0.5, train_utterances=1200, eval_utterances=200)
    # a wider encoder on three times tiny's utterances, at half tiny's rate: at 0.02 this encoder's WER
    # went back to 1.0 after 7,200 utterances even with the decay begun; at 0.01 every seed falls
    # smoothly to 0.02-0.05 (a plateau near the full size's 0.058); warmup + hold = 1.67 epochs of 3,600:
    # the decay begins at about 6,000 utterances, as tiny's
    mini = _tier("rnnt-mini", model=RNNTConfig(vocab=48, enc_hidden=128, enc_pre_layers=1, enc_post_layers=1,
                                                  pred_hidden=64, pred_layers=1, joint_hidden=64, joint_chunk=32,
                                                  enc_dropout=0.0, pred_dropout=0.0, joint_dropout=0.0),
                 global_batch_size=16, micro_batch_size=16, learning_rate=0.01, warmup_epochs=0.25, hold_epochs=1.42,
                 exp_gamma=0.6, epochs=10, eval_every_epochs=0.5, train_utterances=3600, eval_utterances=400)
    return [tiny, mini, _librispeech()]


MEMBERS: MemberSet[RnntSpec] = MemberSet("RNN-T", __package__, _members())
get_member = MEMBERS.member
