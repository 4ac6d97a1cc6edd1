"""The 3D U-Net benchmark family: every member's network width, patch, data, hyperparameters and
quality target.

unet3d-kits19 is MLPerf Training v3.1 closed `unet3d`: the reference 3D U-Net (filters
32-64-128-256-320, 31.2M parameters) on KiTS19 (168 train / 42 evaluation cases, preprocessed to
1.6 x 1.2 x 1.2 mm), DiceCE loss on 128^3 patches with foreground oversampling 0.4, SGD with
Nesterov momentum and the rules' reference hyperparameters for the batch size (its RCPs: base
rate, warmup epochs from 1e-4), sliding-window evaluation (overlap 0.5, Gaussian weights) of all
42 cases every 20 epochs from epoch 1000, to mean DICE 0.908 within 10,000 epochs. The CPU tiers
are the same code path on generated volumes (data/synthetic.py) with a narrower, shallower
network and 32^3 patches; their targets come from reference runs whose evidence sits in targets/.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainclock.errors import UsageError
from trainclock.workload.spec_base import MemberSet, MemberSpec, recorded_target, rules_target
from trainclock.workloads.unet3d.data.npy import reference_eval_cases
from trainclock.workloads.unet3d.model import flops_per_voxel, parameter_count
from trainclock.workload.cost_model import rcp_hyperparameters as rules_hyperparameters

MLPERF_ROUND = "3.1"  # the MLPerf Training round whose closed rules and reference points this benchmark follows

KITS19_TRAIN_CASES = 168
KITS19_EVAL_CASES = 42
METRIC = "mean DICE"


@dataclass(frozen=True)
class Unet3DSpec(MemberSpec):
    filters: tuple[int, ...]
    patch: int  # training and validation patch side (voxels)
    dataset: str  # "kits19" (official, --data) or "synthetic" (generated for a CPU tier)
    global_batch_size: int
    micro_batch_size: int
    learning_rate: float
    initial_learning_rate: float
    warmup_epochs: int
    samples_per_epoch: int  # training cases: one epoch visits each once
    eval_first_samples: int
    eval_every_samples: int
    max_samples: int
    eval_cases: tuple[str, ...]  # case ids (00042) held out for evaluation
    momentum: float = 0.9
    weight_decay: float = 0.0
    decay_boundary_epochs: tuple[int, ...] = ()  # the reference's --lr_decay_epochs (none in the closed rules)
    decay_factor: float = 1.0
    oversampling: float = 0.4
    overlap: float = 0.5
    eval_batch: int = 2  # sliding windows per forward
    generated_cases: int = 0  # CPU tiers: cases generated (train + eval)
    generated_shape: tuple[int, int, int] = (0, 0, 0)  # CPU tiers: the NIfTI shape before resampling
    mlperf_benchmark: str = "unet3d"

    @property
    def patch_shape(self) -> tuple[int, int, int]:
        return (self.patch,) * 3

    def parameter_count(self) -> int:
        return parameter_count(self.filters)

    def flops_per_sample(self) -> float:
        """Training FLOPs (forward + backward, 1:2) of one patch: the convolutions."""
        return 3.0 * flops_per_voxel(self.filters) * self.patch ** 3

    def with_batch(self, global_batch_size: int) -> "Unet3DSpec":
        """The spec at another global batch size: unet3d-kits19 takes the rules' reference
        hyperparameters at that batch (its RCP); a CPU tier keeps its rate."""
        if global_batch_size <= 0:
            raise UsageError(f"global batch size must be a positive number of patches, got {global_batch_size}")
        micro = min(self.micro_batch_size, global_batch_size)
        if self.dataset == "kits19":
            return replace(self, **rcp_hyperparameters(global_batch_size), micro_batch_size=micro)
        return replace(self, global_batch_size=global_batch_size, micro_batch_size=micro)


def rcp_hyperparameters(global_batch_size: int) -> dict:
    """The reference hyperparameters of the rules at this batch size (MLPerf v3.1 unet3d RCPs)."""
    hp = rules_hyperparameters("unet3d", MLPERF_ROUND, global_batch_size, "unet3d-kits19")
    return {"global_batch_size": global_batch_size, "learning_rate": hp["opt_base_learning_rate"],
            "initial_learning_rate": hp["opt_initial_learning_rate"],
            "warmup_epochs": int(hp["opt_learning_rate_warmup_epochs"]), "momentum": hp["opt_momentum"],
            "weight_decay": hp["opt_weight_decay"]}


def _kits19() -> Unet3DSpec:
    return Unet3DSpec(
        name="unet3d-kits19", filters=(32, 64, 128, 256, 320), patch=128, dataset="kits19",
        micro_batch_size=7,  # NVIDIA's per GPU at 56 on 8 (v3.1): 16.7 GB in the dry run on 8 ranks
        samples_per_epoch=KITS19_TRAIN_CASES,
        eval_first_samples=1000 * KITS19_TRAIN_CASES,  # the rules: first evaluation at epoch 1000,
        eval_every_samples=20 * KITS19_TRAIN_CASES,  # then every 20 epochs
        max_samples=10_000 * KITS19_TRAIN_CASES, eval_cases=tuple(reference_eval_cases()),
        **rules_target([(METRIC, "higher", 0.908)], f"Training v{MLPERF_ROUND} closed unet3d rules"),
        **rcp_hyperparameters(56),  # the batch of the published 8-GPU entries (Dell XE9680, 12.1 min)
    )


def _tier(name: str, cases: int, **fields) -> Unet3DSpec:
    eval_cases = tuple(f"{i:05d}" for i in range(cases) if i % 5 == 4)  # every fifth case, as 42 of 210
    return Unet3DSpec(name=name, dataset="synthetic", patch=32, eval_cases=eval_cases,
                      **recorded_target(__package__, name, [(METRIC, "higher")]),
                      samples_per_epoch=cases - len(eval_cases), generated_cases=cases, eval_first_samples=0,
                      initial_learning_rate=1e-4, **fields)


def _members() -> list[Unet3DSpec]:
    # mini's first three levels: the 4-8-16 network's tumour Dice flipped whole cases between evaluations
    # (mean DICE swinging 0.1-0.5 at every rate that learnt in the budget). The rate falls by 0.8 every 2
    # epochs from epoch 20 of 80, just before the curve's steep rise ends, which it calms; evaluated every
    # 2 epochs, so the crossing is seen within a few samples of where it happens
    tiny = _tier("unet3d-tiny", 30, filters=(8, 16, 32), generated_shape=(34, 34, 34), global_batch_size=4,
                 micro_batch_size=4, learning_rate=0.5, warmup_epochs=1, eval_every_samples=48,
                 max_samples=1_920, eval_batch=8, decay_boundary_epochs=tuple(range(20, 80, 2)), decay_factor=0.8)
    # the rate falls by 0.8 every 2 epochs over the last 2/5 of the budget (the reference's --lr_decay_epochs):
    # the curve has reached its plateau by then, and the smaller rate keeps it there
    mini = _tier("unet3d-mini", 60, filters=(8, 16, 32, 64), generated_shape=(38, 38, 38), global_batch_size=8,
                 micro_batch_size=8, learning_rate=0.5, warmup_epochs=1, eval_every_samples=192,
                 max_samples=3_840, eval_batch=8, decay_boundary_epochs=tuple(range(48, 80, 2)), decay_factor=0.8)
    return [tiny, mini, _kits19()]


MEMBERS: MemberSet[Unet3DSpec] = MemberSet("3D U-Net", __package__, _members())
get_member = MEMBERS.member
