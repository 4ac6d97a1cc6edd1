"""Detection images decoded on the device (datasets/image_decode.py through data/loader.py), run
here on the CPU through the same decode_jpeg call: the same images as the PIL path (both are
libjpeg-turbo: measured identical; held to 1/255, nvJPEG on CUDA is not held to it) and the same
targets, flips included, for both full sizes' JPEGs and a tier's PNGs, in training and evaluation;
a broken file or a wrong size is one line; the flag reaches the spec and the job."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.errors import DataError
from trainclock.workload.base import RunSettings
from trainclock.workloads.detection import WORKLOADS
from trainclock.workloads.detection.data.loader import EvalBatches, TrainBatches
from trainclock.workloads.detection.spec import get_member
from trainclock.workloads.detection.workload import load_splits
from trainclock.datasets.image_decode import DeviceJpegDecoder

SSD, MASKRCNN = WORKLOADS
CPU = torch.device("cpu")
WITHIN = 1 / 255  # a rounding step of 8-bit pixels


def splits(tmp_path: Path, workload, member: str, samples: int = 6):
    root = Path(workload.write_sample_data(member, tmp_path, samples=samples, seed=0))
    return load_splits(get_member(member, workload.key), root)


def assert_same_batches(host: dict, device: dict) -> None:
    assert len(host["images"]) == len(device["images"])
    for a, b in zip(host["images"], device["images"]):
        assert a.shape == b.shape and b.dtype == torch.float32
        assert (a - b).abs().max() <= WITHIN
    for a, b in zip(host["targets"], device["targets"]):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("workload, member", [(SSD, "retinanet-resnext50"), (MASKRCNN, "maskrcnn-r50"),
                                              (MASKRCNN, "maskrcnn-tiny")])
def test_device_decoded_batches_equal_the_pil_paths(tmp_path, workload, member):
    train, val = splits(tmp_path, workload, member)
    masks = workload is MASKRCNN
    decoder = DeviceJpegDecoder(CPU, chunk=4)  # 6 images: two chunks
    for step in (0, 1):  # different rows and flips
        host = TrainBatches(train, 3, 6, masks)(step, slice(0, 6))
        device = TrainBatches(train, 3, 6, masks, decoder=decoder)(step, slice(0, 6))
        assert_same_batches(host, device)
    host_eval = list(EvalBatches(val, 2, (0, 1)))
    device_eval = list(EvalBatches(val, 2, (0, 1), decoder))
    assert [ids for _, ids in host_eval] == [ids for _, ids in device_eval]
    for (a, _), (b, _) in zip(host_eval, device_eval):
        assert all((x - y).abs().max() <= WITHIN for x, y in zip(a, b))


def test_a_flip_flips_the_decoded_image(tmp_path):
    train, _ = splits(tmp_path, SSD, "retinanet-resnext50", samples=2)
    batches = TrainBatches(train, 3, 1, False, decoder=DeviceJpegDecoder(CPU, chunk=1))
    flipped = [k for k in range(16) if batches.sample(k)[0].flip]
    kept = [k for k in range(16) if not batches.sample(k)[0].flip]
    record = train.records[batches.position(flipped[0])]
    image = batches(flipped[0], slice(0, 1))["images"][0]
    plain = next(batches(k, slice(0, 1))["images"][0] for k in kept if train.records[batches.position(k)] is record)
    assert torch.equal(image, plain.flip(-1))


def test_broken_files_and_wrong_sizes_are_one_line(tmp_path):
    train, _ = splits(tmp_path, SSD, "retinanet-resnext50", samples=2)
    batches = TrainBatches(train, 3, 2, False, decoder=DeviceJpegDecoder(CPU, chunk=2))
    first, second = train.records
    data = first.file.read_bytes()
    first.file.write_bytes(data[:len(data) // 3])  # truncated: the header reads, the pixels do not
    with pytest.raises(DataError, match=rf"cannot decode image {first.file}") as error:
        batches(0, slice(0, 2))
    assert len(str(error.value).splitlines()) == 1
    second.width += 1
    with pytest.raises(DataError, match=rf"image {second.file} is \d+x\d+, its labels say"):
        batches.sample(next(k for k in range(8) if batches.position(k) == 1))


def test_the_flag_reaches_the_spec_and_the_job(tmp_path):
    parser = argparse.ArgumentParser()
    MASKRCNN.add_arguments(parser.add_argument_group())
    assert parser.parse_args([]).decode_on_device is None
    assert parser.parse_args(["--decode-on-device"]).decode_on_device is True
    data = MASKRCNN.write_sample_data("maskrcnn-tiny", tmp_path, samples=4, seed=0)
    for flag, on in ((None, False), (True, True), (False, False)):  # None: on CUDA only, and this is a CPU
        settings = RunSettings(data=data, extra={"decode_on_device": flag})
        spec = MASKRCNN.resolve("maskrcnn-tiny", settings, Layout(), CPU)
        assert spec.decode_on_device is flag
        job = MASKRCNN.build_job(spec, single_process(), CPU, 0, settings)
        assert (job.batch.decoder is not None) is on
