"""JPEG decoding on the device (device_decode.py), run here on the CPU through the same
decode_jpeg call: the same crops and flips as the PIL path for the same (seed, sample), pixels
within a rounding step of PIL's, grayscale, CMYK and PNG-named-JPEG files as RGB, a broken file as
the PIL path's one line, the loaders' batches unchanged, the flag reaching the spec, and resnet-tiny
training with it forced on."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.workloads.helpers import losses, trainclock
from tests.workloads.resnet.trees import truncate, write_tree
from trainclock.distributed.layout import Layout
from trainclock.errors import DataError
from trainclock.workload.base import RunSettings
from trainclock.workloads.resnet.data.device_decode import DeviceDecoder, eval_sample, read, train_sample
from trainclock.workloads.resnet.data.folder import scan
from trainclock.workloads.resnet.data.loader import EvalLoader, StepLoader
from trainclock.workloads.resnet.data.sample import write_imagenet, write_tier
from trainclock.workloads.resnet.data.transforms import ImageTransforms, crop_box, eval_image, train_image
from trainclock.workloads.resnet.workload import ResNetWorkload

FULL = ImageTransforms(crop=224, resize=256)
SMALL = ImageTransforms(crop=16, resize=18)
CPU = torch.device("cpu")
# libjpeg-turbo decodes the same bytes to the same pixels under PIL and decode_jpeg; PIL's and
# torchvision's antialiased bilinear kernels then differ by rounding: measured mean |diff| 0.06 (train
# crops) and 0.003 (eval) of 255, largest 1, on these images. nvJPEG (CUDA) decodes differently and
# is not held to this bound.
MEAN_DIFF, MAX_DIFF = 0.5, 2


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory) -> list[str]:
    """Full-size sample JPEGs: ImageNet's sizes (500x375 and others) at quality 90."""
    return list(scan(write_imagenet(tmp_path_factory.mktemp("imagenet"), 6, seed=2)).train.files)


def diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.int() - b.int()).abs().float()


def assert_close_to_pil(device: torch.Tensor, pil: torch.Tensor) -> None:
    assert device.shape == pil.shape and device.dtype == torch.uint8
    d = diff(device, pil)
    assert d.mean() < MEAN_DIFF and d.max() <= MAX_DIFF, (float(d.mean()), float(d.max()))


def test_worker_part_draws_the_pil_paths_crop_and_flip(imagenet):
    for k, path in enumerate(imagenet):
        encoded = train_sample(path, FULL, np.random.default_rng([5, k, 1]))
        rng = np.random.default_rng([5, k, 1])  # the PIL path's draws, on the fully decoded image's size
        width, height = Image.open(path).convert("RGB").size
        assert encoded.box == crop_box(rng, width, height, FULL)
        assert encoded.flip == bool(rng.random() < 0.5)
        assert encoded.data.dim() == 1 and bytes(encoded.data.numpy()) == open(path, "rb").read()
    flips = {train_sample(imagenet[0], FULL, np.random.default_rng([5, k, 1])).flip for k in range(16)}
    assert flips == {True, False}


def test_device_path_images_match_the_pil_paths(imagenet):
    decoder = DeviceDecoder(CPU, FULL, chunk=4)  # 6 images: two chunks
    for seed in (0, 7):
        rngs = lambda: [np.random.default_rng([seed, k, 1]) for k in range(len(imagenet))]  # noqa: E731
        pil = torch.stack([train_image(p, FULL, r) for p, r in zip(imagenet, rngs())])
        on_device = decoder([train_sample(p, FULL, r) for p, r in zip(imagenet, rngs())])
        assert_close_to_pil(on_device, pil)
    pil = torch.stack([eval_image(p, FULL) for p in imagenet])
    assert_close_to_pil(decoder([eval_sample(p) for p in imagenet]), pil)


def test_grayscale_cmyk_and_png_named_jpeg_come_out_rgb(tmp_path, imagenet):
    gray = scan(write_tier(tmp_path / "gray", 2, 0, ["a", "b"], 28)).train.files[0]
    assert Image.open(gray).mode == "L"
    cmyk = tmp_path / "cmyk.JPEG"
    Image.open(imagenet[0]).convert("CMYK").save(cmyk, "JPEG", quality=90)
    png = tmp_path / "png.JPEG"  # ImageNet's train set holds one such file
    Image.open(imagenet[1]).save(png, "PNG")
    decoder = DeviceDecoder(CPU, SMALL, chunk=8)
    paths = [gray, str(cmyk), str(png)]
    assert read(str(png))[0].dim() == 3  # decoded by PIL in the worker: decode_jpeg reads only JPEGs
    rngs = lambda: [np.random.default_rng([1, k, 1]) for k in range(3)]  # noqa: E731
    on_device = decoder([train_sample(p, SMALL, r) for p, r in zip(paths, rngs())])
    assert on_device.shape == (3, 3, 16, 16)
    assert_close_to_pil(on_device, torch.stack([train_image(p, SMALL, r) for p, r in zip(paths, rngs())]))
    assert_close_to_pil(decoder([eval_sample(p) for p in paths]), torch.stack([eval_image(p, SMALL) for p in paths]))


@pytest.mark.parametrize("damage", [truncate, lambda path: path.write_bytes(b"not an image")])
def test_a_broken_file_is_the_pil_paths_one_line_naming_it(tmp_path, damage):
    files = scan(write_tree(tmp_path, size=(60, 45))).train.files
    broken = Path(files[1])
    damage(broken)
    with pytest.raises(DataError) as pil:
        train_image(broken, SMALL, np.random.default_rng(0))
    decoder = DeviceDecoder(CPU, SMALL, chunk=8)
    with pytest.raises(DataError) as device:
        decoder([train_sample(p, SMALL, np.random.default_rng(0)) for p in files])
    for e in (pil, device):
        assert str(e.value).startswith(f"cannot decode image {broken} (") and "\n" not in str(e.value)
        assert "decode_jpeg.cpp" not in str(e.value)


def test_loaders_give_the_same_batches_with_either_path(tmp_path):
    folder = scan(write_tree(tmp_path, classes=2, per_class=4, val_per_class=3, size=(60, 45)))
    pil = StepLoader(folder.train, SMALL, 3, 4, slice(0, 4), workers=0)
    device = StepLoader(folder.train, SMALL, 3, 4, slice(0, 4), workers=0, decoder=DeviceDecoder(CPU, SMALL, 2))
    for step in (0, 1, 5):
        a, b = pil(step, slice(0, 4)), device(step, slice(0, 4))
        assert torch.equal(a["label"], b["label"])
        assert_close_to_pil(b["image"], a["image"])
    evals = [list(EvalLoader(folder.val, SMALL, 4, (0, 1), 0, decoder=d)) for d in (None, DeviceDecoder(CPU, SMALL, 4))]
    assert len(evals[0]) == len(evals[1]) == 2
    for (a, la), (b, lb) in zip(*evals):
        assert torch.equal(la, lb)
        assert_close_to_pil(b, a)


def test_flag_reaches_the_spec_and_defaults_to_the_device():
    workload = ResNetWorkload()
    parser = argparse.ArgumentParser()
    workload.add_arguments(parser.add_argument_group("resnet"))
    assert parser.parse_args([]).decode_on_device is None
    assert parser.parse_args(["--decode-on-device"]).decode_on_device is True
    assert parser.parse_args(["--no-decode-on-device"]).decode_on_device is False
    resolve = lambda extra: workload.resolve("resnet-tiny", RunSettings(extra=extra), Layout(), CPU)  # noqa: E731
    assert resolve({}).decode_on_device is None  # decided by the run's device: CUDA decodes on it
    assert resolve({"decode_on_device": True}).decode_on_device is True
    assert resolve({"decode_on_device": False}).decode_on_device is False


@pytest.mark.slow
def test_resnet_tiny_trains_with_decoding_forced_on_device(tmp_path):
    # Fashion-MNIST's export: 28-pixel grayscale JPEGs, decoded to RGB by decode_jpeg
    proc = trainclock("run", "resnet-tiny", "--out", str(tmp_path), "--no-progress", "--precision", "fp32",
                      "--seed", "3", "--max-samples", "4096", "--decode-on-device")
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-3000:]
    curve = losses(tmp_path, "resnet-tiny")
    assert len(curve) == 64  # 64 steps: the rate climbs to 0.2 over 448, so 16 would hardly move the loss
    assert np.mean(curve[-3:]) < np.mean(curve[:3]) - 0.2, curve
