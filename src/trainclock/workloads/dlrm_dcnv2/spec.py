"""The DLRM-DCNv2 benchmark family: every member's shape, data, hyperparameters and quality target.

dlrm-criteo1tb is MLPerf Training v3.1 closed `dlrm_dcnv2` (the reference recommendation_v2/
torchrec_dlrm): 26 embedding tables of dimension 128 with the reference's row counts (capped at
40M) and multi-hot sizes, a bottom MLP 13-512-256-128, three low-rank (512) DCNv2 cross layers over
the 27 x 128 concatenated features, a top MLP 1024-1024-512-256-1; Adagrad with the rules' fixed
values; AUC >= 0.80275 within one epoch of days 0-22 (4,195,197,692 samples), evaluated every 0.05
epoch on the first half of day 23 (89,137,319 samples). Learning rate and batch are a reference
convergence point of the rules (RCP). The CPU tiers are the same code path at smaller tables,
bags and widths, on click logs generated from a known click model (data/clicks.py); their targets
come from reference runs whose evidence sits in targets/.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload import evidence
from trainclock.workload.cost_model import rcp_hyperparameters as rules_hyperparameters
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target

MLPERF_ROUND = "3.1"  # the MLPerf Training round whose closed rules and reference points this benchmark follows

METRIC = "AUC"
DENSE_FEATURES = 13
# the reference's --num_embeddings_per_feature and --multi_hot_sizes (README, MLPerf v3.1)
CRITEO_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938,
               155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
CRITEO_MULTI_HOT = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)
CRITEO_TRAIN_SAMPLES = 4_195_197_692  # days 0-22
CRITEO_EVAL_SAMPLES = 89_137_319  # the first half of day 23
CRITEO_DAYS = 24
ADAGRAD_EPS = 1e-8


@dataclass(frozen=True)
class DlrmShape:
    rows: tuple[int, ...]  # rows of each of the 26 tables
    multi_hot: tuple[int, ...]  # ids per bag of each table
    dim: int  # embedding dimension = the bottom MLP's output
    bottom: tuple[int, ...]  # bottom (dense) MLP widths, ending in dim
    top: tuple[int, ...]  # top (over) MLP widths, ending in 1
    cross_layers: int = 3
    cross_rank: int = 512

    @property
    def interaction_width(self) -> int:
        return (len(self.rows) + 1) * self.dim

    def embedding_parameters(self) -> int:
        return sum(self.rows) * self.dim

    def dense_parameters(self) -> int:
        """Bottom MLP, the low-rank cross layers (V: d->r without bias, W: r->d with bias) and top MLP."""
        mlp = lambda widths, first: sum(i * o + o for i, o in zip((first, *widths[:-1]), widths))  # noqa: E731
        d, r = self.interaction_width, self.cross_rank
        return mlp(self.bottom, DENSE_FEATURES) + self.cross_layers * (2 * d * r + d) + mlp(self.top, d)

    def parameter_count(self) -> int:
        return self.embedding_parameters() + self.dense_parameters()

    def flops_per_sample(self) -> float:
        """Training FLOPs (3x forward) of the matmuls (MLPs and cross layers) and the bag sums;
        the embedding lookups themselves move memory and count for nothing here."""
        matmuls = 2 * (self.dense_parameters() - self.cross_layers * self.interaction_width)
        cross_products = 2 * self.cross_layers * self.interaction_width  # x0 * (...) + x
        bags = sum(self.multi_hot) * self.dim
        return 3.0 * (matmuls + cross_products + bags)


@dataclass(frozen=True)
class DlrmSpec(MemberSpec):
    shape: DlrmShape
    data: str  # "criteo" (official files, --data) or "clicks" (a tier's generated log)
    learning_rate: float
    eval_every_samples: int
    eval_samples: int  # the rules' count, as logged (criteo) / the tier's eval rows
    samples_per_epoch: int  # one pass over the training days
    max_samples: int  # one epoch, in whole batches: the benchmark's limit
    # CPU tiers: the generated click log
    train_days: int = 23
    rows_per_day: int = 0
    eval_day_rows: int = 0  # the eval day's rows; its first half is the validation set, as the reference
    mlperf_benchmark: str = "dlrm_dcnv2"
    # how the tables are laid over the data-parallel ranks: "none" (every rank holds every table,
    # DDP all-reduces their gradients), "auto", "table" or "row" (sharding.py, distributed/embeddings.py)
    embedding_sharding: str = "none"

    def with_batch(self, global_batch_size: int) -> "DlrmSpec":
        """The spec at another global batch size: the full size takes the rules' reference learning
        rate at that batch (its RCP); every member keeps the cadence of 20 evaluations an epoch."""
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of samples, got {global_batch_size}")
        lr = rcp_learning_rate(global_batch_size) if self.data == "criteo" else self.learning_rate
        return replace(self, global_batch_size=global_batch_size, learning_rate=lr,
                       micro_batch_size=min(self.micro_batch_size, global_batch_size),
                       eval_every_samples=eval_every(self.samples_per_epoch, global_batch_size),
                       max_samples=self.samples_per_epoch // global_batch_size * global_batch_size)


def eval_every(samples_per_epoch: int, global_batch_size: int) -> int:
    """Every 0.05 epoch, in whole steps as the reference counts it:
    validation_freq_within_epoch = TOTAL_TRAINING_SAMPLES // (GLOBAL_BATCH_SIZE * 20) steps."""
    return max(1, samples_per_epoch // (global_batch_size * 20)) * global_batch_size


def rcp_learning_rate(global_batch_size: int) -> float:
    hp = rules_hyperparameters("dlrm_dcnv2", MLPERF_ROUND, global_batch_size, "dlrm_dcnv2")
    return float(hp["opt_base_learning_rate"])


def criteo_shape() -> DlrmShape:
    return DlrmShape(rows=CRITEO_ROWS, multi_hot=CRITEO_MULTI_HOT, dim=128, bottom=(512, 256, 128),
                     top=(1024, 1024, 512, 256, 1), cross_layers=3, cross_rank=512)


def _criteo() -> DlrmSpec:
    gbs = 65_536  # the reference README's batch, one of the rules' RCPs
    return DlrmSpec(name="dlrm-criteo1tb", shape=criteo_shape(), data="criteo", global_batch_size=gbs,
                    micro_batch_size=gbs, learning_rate=rcp_learning_rate(gbs),
                    eval_every_samples=eval_every(CRITEO_TRAIN_SAMPLES, gbs), eval_samples=CRITEO_EVAL_SAMPLES,
                    samples_per_epoch=CRITEO_TRAIN_SAMPLES,
                    **rules_target([(METRIC, "higher", 0.80275)], f"Training v{MLPERF_ROUND} closed dlrm_dcnv2 rules"),
                    max_samples=CRITEO_TRAIN_SAMPLES // gbs * gbs, train_days=CRITEO_DAYS - 1)


def target_evidence(name: str) -> dict:
    """The recorded reference runs that fixed a CPU tier's target (targets/<name>.json)."""
    return evidence.load(__package__, name)


def tier_shape(row_cap: int, dim: int, bottom: tuple[int, ...], top: tuple[int, ...], rank: int) -> DlrmShape:
    """The reference's 26 tables with rows capped and bags a quarter as long (at least one id):
    the same skew of table sizes and bag lengths, small enough for a CPU."""
    return DlrmShape(rows=tuple(min(r, row_cap) for r in CRITEO_ROWS),
                     multi_hot=tuple(-(-m // 4) for m in CRITEO_MULTI_HOT),
                     dim=dim, bottom=bottom, top=top, cross_layers=3, cross_rank=rank)


def _tier(name: str, shape: DlrmShape, *, gbs: int, lr: float, train_days: int, rows_per_day: int,
          eval_day_rows: int) -> DlrmSpec:
    target = recorded_target(__package__, name, [(METRIC, "higher")])
    found = target_evidence(name)
    if "best_achievable_auc" in found:
        target["target_note"] += f"; best achievable AUC {found['best_achievable_auc']}"
    epoch = train_days * rows_per_day
    return DlrmSpec(name=name, shape=shape, data="clicks", global_batch_size=gbs, micro_batch_size=gbs,
                    learning_rate=lr, eval_every_samples=eval_every(epoch, gbs),
                    eval_samples=(eval_day_rows + 1) // 2, samples_per_epoch=epoch,
                    **target,
                    max_samples=epoch // gbs * gbs, train_days=train_days, rows_per_day=rows_per_day,
                    eval_day_rows=eval_day_rows)


def _members() -> list[DlrmSpec]:
    tiny = _tier("dlrm-tiny", tier_shape(400, 16, (64, 32, 16), (128, 64, 1), 32),
                 gbs=512, lr=0.02, train_days=3, rows_per_day=40_960, eval_day_rows=40_000)
    mini = _tier("dlrm-mini", tier_shape(4_000, 32, (128, 64, 32), (256, 128, 64, 1), 64),
                 gbs=1024, lr=0.01, train_days=6, rows_per_day=65_536, eval_day_rows=100_000)
    return [tiny, mini, _criteo()]


MEMBERS: MemberSet[DlrmSpec] = MemberSet("DLRM-DCNv2", __package__, _members())
get_member = MEMBERS.member
