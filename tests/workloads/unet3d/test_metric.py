"""Mean DICE from summed per-shard statistics equals torchmetrics' DiceScore over the whole set
(per case, kidney and tumour, then averaged); the sliding window gives the reference's weighted
average whatever the windows per forward; DiceCE matches a hand formula."""

from __future__ import annotations


import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchmetrics.segmentation import DiceScore

from trainclock.workload.base import EvalShard
from trainclock.workloads.unet3d.data.npy import Case
from trainclock.workloads.unet3d.loss import dice_ce_loss
from trainclock.workloads.unet3d.metric import METRIC, dice_sums, score
from trainclock.workloads.unet3d.model import Unet3D
from trainclock.workloads.unet3d.sliding_window import gaussian_weights, sliding_window
from trainclock.workload.evaluation import evaluating


def cases(n: int = 7) -> list[Case]:
    rng = np.random.default_rng(2)
    out = []
    for i in range(n):
        shape = (1, *(int(s) for s in rng.integers(16, 24, size=3)))
        image = rng.normal(size=shape).astype(np.float32)
        label = np.zeros(shape, np.uint8)
        label[:, 4:12, 4:12, 4:12] = 1
        label[:, 6:9, 6:9, 6:9] = 2
        out.append(Case(f"case_{i:05d}", image + label.astype(np.float32), label))
    return out


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_summed_shards_give_torchmetrics_dice_over_the_whole_set(ranks):
    torch.manual_seed(0)
    model = Unet3D((2, 4))
    data = cases()
    with evaluating(model):  # as the loop evaluates
        shards = [dice_sums(model, data, (8, 8, 8), 0.5, (r, ranks)) for r in range(ranks)]
    total = EvalShard(sums={k: sum(s.sums[k] for s in shards) for k in shards[0].sums})
    assert float(total.sums["cases"]) == len(data)
    metric = DiceScore(num_classes=3, include_background=False, average="none", input_format="index")
    with torch.no_grad():
        for case in data:
            logits, label = sliding_window(model.eval(), torch.from_numpy(case.image[None]),
                                           torch.from_numpy(case.label[None]), (8, 8, 8))
            metric.update(logits.argmax(1), label[:, 0].long())
    per_class = metric.compute()  # the mean over cases of each class's Dice
    assert score(total)[METRIC] == pytest.approx(float(per_class.mean()), abs=1e-6)
    assert score(total)["tumour DICE"] == pytest.approx(float(per_class[1]), abs=1e-6)


def test_sliding_window_is_the_gaussian_weighted_average_of_the_windows():
    roi = (8, 8, 8)
    volume = torch.randn(1, 1, 16, 16, 16)
    label = torch.zeros(1, 1, 16, 16, 16, dtype=torch.uint8)

    def model(x):  # logits = the input in every class channel: the weighted average of copies is the input
        return x.repeat(1, 3, 1, 1, 1)

    logits, cropped = sliding_window(model, volume, label, roi, batch=1)
    assert logits.shape == (1, 3, 16, 16, 16) and cropped.shape == label.shape
    assert torch.allclose(logits[:, 0:1], volume, atol=1e-5)
    net = Unet3D((2, 4)).eval()
    with torch.no_grad():
        one, _ = sliding_window(net, volume, label, roi, batch=1)
        many, _ = sliding_window(net, volume, label, roi, batch=5)
    assert torch.allclose(one, many, atol=1e-5)
    weights = gaussian_weights(8)
    assert float(weights.max()) == 1.0 and weights[0, 0, 0] < weights[4, 4, 4]


def test_dice_ce_matches_the_reference_formula():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 4, 4, 4)
    label = torch.randint(0, 3, (2, 1, 4, 4, 4), dtype=torch.uint8)
    p = logits.softmax(1)[:, 1:]
    t = F.one_hot(label[:, 0].long(), 3).permute(0, 4, 1, 2, 3)[:, 1:].float()
    dice = (2 * (p * t).sum((2, 3, 4)) + 1e-6) / (p.sum((2, 3, 4)) + t.sum((2, 3, 4)) + 1e-6)
    expected = ((1 - dice).mean() + F.cross_entropy(logits, label[:, 0].long())) / 2
    assert float(dice_ce_loss(logits, label)) == pytest.approx(float(expected), rel=1e-6)


def test_reference_network_has_31_2m_parameters():
    from trainclock.workloads.unet3d.model import parameter_count

    with torch.device("meta"):
        model = Unet3D((32, 64, 128, 256, 320))
    assert sum(p.numel() for p in model.parameters()) == parameter_count((32, 64, 128, 256, 320)) == 31_190_243
    assert model.downsampling == 32




def test_flops_formula_counts_what_torch_counts():
    from torch.utils.flop_counter import FlopCounterMode

    from trainclock.workloads.unet3d.model import flops_per_voxel

    for filters in ((4, 8, 16), (8, 16, 32, 64)):
        with FlopCounterMode(display=False) as counter:
            Unet3D(filters)(torch.randn(1, 1, 32, 32, 32))
        assert counter.get_total_flops() == pytest.approx(flops_per_voxel(filters) * 32 ** 3)
