"""resnet-50: torchvision's ResNet-50 v1.5 with 25.6M parameters (on the meta device), the rules'
hyperparameters at each reference batch, and the log of a short run of the full config (its
optimizer keys, cadence in epochs, batch-norm span and target) passing the official checker's
closed resnet rules with LARS and with SGD, trained as a reduced copy of the network (ResNet-50 at
224 pixels is too slow here) on a few JPEGs in the ImageNet folder layout the test writes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tests.workloads.helpers import closed_rule_failures, header_of, run_reduced_full_config
from tests.workloads.resnet.trees import write_tree
from trainclock.errors import UsageError
from trainclock.mllog.reader import read_events
from trainclock.workload.base import RunSettings
from trainclock.workloads.resnet import WORKLOAD
from trainclock.workloads.resnet.data.transforms import ImageTransforms
from trainclock.workloads.resnet.model import RESNET50, ResNetShape, build_model, train_flops_per_image
from trainclock.workloads.resnet.metric import METRIC
from trainclock.workloads.resnet.spec import get_member


def test_resnet50_is_torchvisions_v1_5_with_25_6m_parameters():
    spec = get_member("resnet-50")
    assert spec.shape == RESNET50
    with torch.device("meta"):
        model = build_model(spec.shape)
    assert sum(p.numel() for p in model.parameters()) == 25_557_032
    assert model.layer2[0].conv2.stride == (2, 2)  # v1.5: the stride on the 3x3, not the 1x1
    assert train_flops_per_image(spec.shape) == pytest.approx(3 * 8.18e9, rel=1e-3)  # 4.09 GMACs forward
    assert (spec.transforms.crop, spec.transforms.resize, spec.label_smoothing) == (224, 256, 0.1)
    assert (spec.targets[METRIC], spec.optimizer, spec.global_batch_size) == (0.759, "lars", 3264)


def test_other_batches_take_the_rules_reference_hyperparameters():
    spec = get_member("resnet-50").with_batch(1632)
    assert (spec.learning_rate, spec.warmup_epochs, spec.decay_steps, spec.weight_decay) == (7.4, 2, 27476, 5e-5)
    sgd = spec.with_optimizer("sgd")
    assert sgd.learning_rate == pytest.approx(0.1 * 1632 / 256, abs=1e-3) and sgd.decay_steps == 27476
    with pytest.raises(UsageError, match="reference hyperparameters"):
        get_member("resnet-50").with_batch(1000)
    with pytest.raises(UsageError, match="applies to resnet-50"):
        get_member("resnet-mini").with_optimizer("lars")


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["lars", "sgd"])
def test_full_config_log_passes_the_official_closed_resnet_rules(tmp_path, optimizer):
    full = get_member("resnet-50").with_batch(1632).with_optimizer(optimizer)  # the smallest reference batch
    spec = replace(full, shape=ResNetShape("basic", (1,), (4,), "cifar", 1000, 16),
                   transforms=ImageTransforms(crop=16, resize=18), loader_workers=1)
    data = write_tree(tmp_path / "imagenet", classes=2, per_class=4, val_per_class=2)
    assert spec.global_batch_size == 1632
    log = run_reduced_full_config(WORKLOAD, spec, tmp_path / "out", RunSettings(data=str(data)),
                                  max_samples=spec.global_batch_size)
    # the only rule an aborted run breaks: the target was not reached
    assert closed_rule_failures(log) == ["Failed checks for eval_accuracy : v['value'] >= 0.7590 and v['value'] < 1.0"]
    events, _ = read_events(log)
    header = header_of(events)
    assert header["submission_division"] == "closed" and header["opt_name"] == optimizer
    assert header["model_bn_span"] == 204 and header["global_batch_size"] == 1632
    assert header["eval_samples"] == 4 and header["dataset"] == "imagenet"
    first = next(e for e in events if e.key == "eval_accuracy")
    assert first.metadata["epoch_num"] == 1632 / 8  # progress in epochs of the 8 training images
