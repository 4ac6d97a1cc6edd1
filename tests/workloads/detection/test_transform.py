"""The detection transform: torchvision's, without a host read for one training size, and for
Mask R-CNN with bucketed batch shapes: the same images and sizes as torchvision's padding, in a
few shapes instead of hundreds, for a few percent more pixels."""

from __future__ import annotations

import numpy as np
import torch
from torchvision.models.detection.transform import GeneralizedRCNNTransform

from tests.host_reads import HostReads
from trainclock.workloads.detection.transform import DetectionTransform, bucket_of, bucket_sides
from trainclock.workloads.detection.model import IMAGE_MEAN, IMAGE_STD


def test_sides_start_at_the_short_side_and_end_at_the_long_sides_limit():
    assert bucket_sides(800, 1333) == (800, 928, 1056, 1184, 1312, 1344)
    assert bucket_of(800, bucket_sides(800, 1333)) == 800 and bucket_of(801, bucket_sides(800, 1333)) == 928
    assert bucket_of(1400, bucket_sides(800, 1333)) == 1408  # longer than every bucket: its own, to 32


def test_a_batch_is_torchvisions_batch_padded_further_with_the_same_image_sizes():
    torch.manual_seed(0)
    images = [torch.rand(3, 480, 640), torch.rand(3, 427, 640), torch.rand(3, 640, 480)]
    ours = DetectionTransform(800, 1333, IMAGE_MEAN, IMAGE_STD, bucketed=True).eval()
    theirs = GeneralizedRCNNTransform(800, 1333, IMAGE_MEAN, IMAGE_STD).eval()
    got, _ = ours(images)
    want, _ = theirs(images)
    assert got.image_sizes == want.image_sizes
    h, w = want.tensors.shape[-2:]
    assert got.tensors.shape[-2:] == (bucket_of(h, ours.sides), bucket_of(w, ours.sides))
    assert torch.equal(got.tensors[..., :h, :w], want.tensors)  # the same pixels, zeros beyond
    assert got.tensors[..., h:, :].abs().sum() == 0 and got.tensors[..., :, w:].abs().sum() == 0


def test_coco_like_sizes_make_few_shapes_for_little_padding():
    """COCO-like aspect ratios (70% landscape up to 1.8:1, the rest portrait), batches of 2."""
    rng = np.random.default_rng(0)
    landscape = rng.random(2000) < 0.7
    aspects = np.where(landscape, rng.uniform(1.0, 1.8, 2000), rng.uniform(0.55, 1.0, 2000))
    sizes = []
    for a in aspects:  # resized as torchvision does: short side 800, long side at most 1333
        short, long = 800, min(800 * max(a, 1 / a), 1333)
        sizes.append((short, int(long)) if a >= 1 else (int(long), short))
    sides = bucket_sides(800, 1333)
    plain, bucketed, plain_pixels, bucketed_pixels = set(), set(), 0, 0
    for i in range(0, len(sizes), 2):
        h, w = max(s[0] for s in sizes[i:i + 2]), max(s[1] for s in sizes[i:i + 2])
        p = (-(-h // 32) * 32, -(-w // 32) * 32)
        b = (bucket_of(h, sides), bucket_of(w, sides))
        plain.add(p), bucketed.add(b)
        plain_pixels += p[0] * p[1]
        bucketed_pixels += b[0] * b[1]
    assert len(bucketed) <= len(bucket_sides(800, 1333)) ** 2 and len(plain) > 5 * len(bucketed)  # 247 against 35
    assert bucketed_pixels / plain_pixels < 1.06  # 4.9% more pixels


def test_one_training_size_is_taken_without_a_host_read_and_the_same_output():
    torch.manual_seed(0)
    images = [torch.rand(3, 48, 64), torch.rand(3, 64, 40)]
    targets = [{"boxes": torch.tensor([[1.0, 2.0, 30.0, 40.0]]), "labels": torch.tensor([1])} for _ in images]
    ours, theirs = DetectionTransform(64, 96, IMAGE_MEAN, IMAGE_STD), GeneralizedRCNNTransform(64, 96, IMAGE_MEAN, IMAGE_STD)
    with HostReads() as reads:
        got, got_targets = ours(images, [dict(t) for t in targets])
    want, want_targets = theirs(images, [dict(t) for t in targets])
    assert reads.count == 0
    assert torch.equal(got.tensors, want.tensors) and got.image_sizes == want.image_sizes
    assert all(torch.equal(a["boxes"], b["boxes"]) for a, b in zip(got_targets, want_targets))
