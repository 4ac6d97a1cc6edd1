"""JPEG decoding on the run's device: the loader workers only read each sample's file and its JPEG
header and draw its crop and flip (the PIL path's generator, in the PIL path's order, so a sample
gets the same crop whichever path decodes it); the batch function then decodes the rank's rows
with torchvision.io.decode_jpeg (nvJPEG's batched decoder on CUDA, libjpeg-turbo on a CPU), crops
and resizes each image with antialiased bilinear (torchvision's tensor kernel, which follows PIL's
to within rounding), flips, and stacks uint8 NCHW on the device.

Why: PIL decoding and cropping cost a CPU core per ~430 full-size images/s, so one GPU at
NVIDIA's ~7,090 images/s would need ~24 host cores; reading bytes and a header costs a small
fraction of that (benchmarks/resnet_decode.py). Used on CUDA by default (--decode-on-device)."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass

import numpy as np
import torch
import torchvision.transforms.v2.functional as F
from PIL import Image
from torchvision.io import ImageReadMode, decode_jpeg

from trainclock.workloads.resnet.data.transforms import (DECODE_ERRORS, ImageTransforms, as_tensor, crop_box, decode,
                                                         decode_error)

JPEG_START = b"\xff\xd8"  # the SOI marker every JPEG begins with


@dataclass(frozen=True)
class Encoded:
    """What a worker returns for one sample: its file as read, and the augmentation already drawn."""

    data: torch.Tensor  # the JPEG's bytes (1-D uint8); or, for a file that is not a JPEG, PIL's uint8 CHW decode
    path: str
    box: tuple[int, int, int, int] | None = None  # training crop (top, left, height, width); None: evaluation
    flip: bool = False


def read(path: str) -> tuple[torch.Tensor, int, int]:
    """(bytes, width, height) of a JPEG, its size from the header only; a file in another format
    (ImageNet's train set holds a PNG under a .JPEG name) is decoded here by PIL, as the PIL path
    would, since decode_jpeg reads only JPEGs: (uint8 CHW, width, height)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        with Image.open(io.BytesIO(raw)) as header:  # parses the header only: no pixel is decoded
            width, height = header.size
    except DECODE_ERRORS as e:
        raise decode_error(path, e) from None
    if raw[:2] != JPEG_START:  # by content, not PIL's format name (a camera's JPEG opens as "MPO")
        return as_tensor(decode(path)), width, height
    # frombuffer warns on read-only bytes: a bytearray (one ~110 KB copy) is writable
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8), width, height


def train_sample(path: str, t: ImageTransforms, rng: np.random.Generator) -> Encoded:
    """transforms.train_image's worker half: the same draws from rng, in the same order."""
    data, width, height = read(path)
    box = crop_box(rng, width, height, t)
    return Encoded(data, path, box, flip=bool(rng.random() < 0.5))


def eval_sample(path: str) -> Encoded:
    return Encoded(read(path)[0], path)


def _reason(e: RuntimeError) -> str:
    """decode_jpeg's message without its C++ source location: 'decode_jpeg, <file>:<line>, <reason>'."""
    return str(e).strip().splitlines()[-1].rsplit(", ", 1)[-1]


class DeviceDecoder:
    """Decodes workers' Encoded samples into a uint8 NCHW batch on `device`. One per loader (train,
    eval): each owns a CUDA stream, and those two loaders run on different threads."""

    def __init__(self, device: torch.device, transforms: ImageTransforms, chunk: int) -> None:
        self.device, self.transforms = device, transforms
        self.chunk = max(1, chunk)  # images decoded at once: bounds the full-size decodes held on the device
        cuda = device.type == "cuda"
        self._stream = torch.cuda.Stream(device) if cuda else None
        # the stream the loop consumes batches on (the one current where the loader is built)
        self._consumer = torch.cuda.current_stream(device) if cuda else None
        self._lock = threading.Lock()  # one batch at a time on the stream (the synchronize points assume it)

    def __call__(self, items: list[Encoded]) -> torch.Tensor:
        if self._stream is None:
            return self._decode(items)
        with self._lock, torch.cuda.stream(self._stream):
            batch = self._decode(items)
            self._stream.synchronize()  # the batch is complete before the loop's stream reads it (on this thread)
        batch.record_stream(self._consumer)  # its memory is not reused while the loop's stream may still read it
        return batch

    def _decode(self, items: list[Encoded]) -> torch.Tensor:
        out = []
        for start in range(0, len(items), self.chunk):
            part = items[start:start + self.chunk]
            images = self._decode_jpegs(part)
            out.extend(self._finish(image, item) for image, item in zip(images, part))
        return torch.stack(out)

    def _decode_jpegs(self, items: list[Encoded]) -> list[torch.Tensor]:
        jpegs = [i for i, item in enumerate(items) if item.data.dim() == 1]
        decoded = [item.data if item.data.dim() == 1 else item.data.to(self.device, non_blocking=True)
                   for item in items]
        if not jpegs:
            return decoded
        if self._stream is not None:
            # nvJPEG may write into blocks freed on this stream while queued kernels still read them
            # (pytorch/vision#9606): let this stream's earlier work finish before each decode
            self._stream.synchronize()
        try:
            images = decode_jpeg([items[i].data for i in jpegs], mode=ImageReadMode.RGB, device=self.device)
        except RuntimeError:  # the batch fails as a whole: find the file, or the one the device cannot take
            images = [self._decode_one(items[i]) for i in jpegs]
        for i, image in zip(jpegs, images):
            decoded[i] = image
        return decoded

    def _decode_one(self, item: Encoded) -> torch.Tensor:
        """One JPEG on the device or, where nvJPEG refuses one that libjpeg-turbo reads, on the CPU;
        a file neither decodes is the PIL path's one-line DataError, naming it."""
        try:
            return decode_jpeg(item.data, mode=ImageReadMode.RGB, device=self.device)
        except RuntimeError as e:
            error = e
        if self.device.type != "cpu":
            try:
                return decode_jpeg(item.data, mode=ImageReadMode.RGB).to(self.device)
            except RuntimeError as e:
                error = e
        raise decode_error(item.path, _reason(error)) from None

    def _finish(self, image: torch.Tensor, item: Encoded) -> torch.Tensor:
        """transforms.train_image / eval_image's pixel work on a decoded CHW tensor."""
        t = self.transforms
        if item.box is None:  # evaluation: shorter side to t.resize, then the center crop
            return F.center_crop(F.resize(image, [t.resize], antialias=True), [t.crop, t.crop])
        top, left, h, w = item.box
        # per image: the decodes differ in size, and a batched crop (roi_align) has no antialiasing
        image = F.resized_crop(image, top, left, h, w, [t.crop, t.crop], antialias=True)
        return F.horizontal_flip(image) if item.flip else image
