"""Mean DICE, the unet3d target metric, as the reference scores it (model/losses.py DiceScore and
runtime/inference.py): per evaluation case, the argmax prediction of the sliding-window logits
against the labels, Dice = (2|P&T| + 1e-6) / (|P| + |T| + 1e-6) for kidney (1) and tumour (2);
each class's Dice averaged over the cases, then the two averaged. Each data-parallel rank scores
its share of the cases and returns the summed per-case Dice and its case count; the loop adds them
over ranks, so the mean is over the whole evaluation set, not a mean of per-rank means."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from trainclock.workload.base import EvalShard
from trainclock.workload.evaluation import shard_rows
from trainclock.workloads.unet3d.data.npy import Case
from trainclock.workloads.unet3d.sliding_window import sliding_window

METRIC = "mean DICE"
SMOOTH = 1e-6


def case_dice(logits_1CDHW: torch.Tensor, label_11DHW: torch.Tensor) -> torch.Tensor:
    """[kidney, tumour] Dice of one case, in float64."""
    predicted = logits_1CDHW.argmax(1)
    target = label_11DHW[:, 0].long()
    scores = []
    for cls in (1, 2):
        p, t = predicted == cls, target == cls
        intersection = (p & t).sum().double()
        scores.append((2 * intersection + SMOOTH) / (p.sum().double() + t.sum().double() + SMOOTH))
    return torch.stack(scores)


def dice_sums(model: nn.Module, cases: list[Case], roi: tuple[int, int, int], overlap: float, shard: tuple[int, int],
              autocast=contextlib.nullcontext, device: torch.device = torch.device("cpu"), batch: int = 4) -> EvalShard:
    """This shard's summed per-case [kidney, tumour] Dice and its number of cases: rank r of R takes
    the cases [r*n/R, (r+1)*n/R), in order."""
    rows = shard_rows(len(cases), shard)
    mine = cases[rows.start:rows.stop]
    net = getattr(model, "module", model)  # DDP: forwards of different counts per rank need no collectives
    total = torch.zeros(2, dtype=torch.float64)
    for case in mine:
        image = torch.from_numpy(case.image[None].astype("float32", copy=True)).to(device)
        label = torch.from_numpy(case.label[None].astype("uint8", copy=True)).to(device)
        with autocast():
            logits, cropped = sliding_window(net, image, label, roi, overlap, batch)
        total += case_dice(logits, cropped).cpu()
    return EvalShard(sums={"dice_sum": total, "cases": torch.tensor(float(len(mine)), dtype=torch.float64)})


def score(stats: EvalShard) -> dict[str, float]:
    per_class = stats.sums["dice_sum"] / stats.sums["cases"].clamp(min=1)
    return {METRIC: float(per_class.mean()), "kidney DICE": float(per_class[0]), "tumour DICE": float(per_class[1])}
