"""JPEG decoding on the run's device, for any workload whose loader reads images: the host reads
each file's bytes and its size from the JPEG header (no pixel decoded), and the batch is decoded on
the device by torchvision.io.decode_jpeg (nvJPEG's batched decoder on CUDA, libjpeg-turbo on a CPU),
a chunk at a time, each image finished (cropped, resized, converted) by the caller before the next
chunk decodes. A file that is not a JPEG is decoded on the host by PIL; a JPEG that nvJPEG refuses
is decoded on the CPU; a file neither reads is one DataError naming it.

Why: PIL decodes a full-size image in milliseconds of a host core, and one GPU at the published
rates would need more cores than a node gives it; reading bytes and a header costs a small
fraction of that (the benchmarks/*_decode.py measurements)."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np
import torch
from PIL import Image

from trainclock.errors import DataError

JPEG_START = b"\xff\xd8"  # the SOI marker every JPEG begins with
DECODE_ERRORS = (OSError, SyntaxError, ValueError, Image.DecompressionBombError)  # what PIL raises for a bad file


class EncodedImage(Protocol):
    """What a loader hands the decoder for one image: `data`, the JPEG's bytes (1-D uint8) or, for
    a file that is not a JPEG, its decoded uint8 CHW pixels (read() returns either); `path`, for errors."""

    data: torch.Tensor
    path: str


Item = TypeVar("Item", bound=EncodedImage)


def decode_jpeg(data, device: torch.device | str = "cpu"):
    """torchvision.io.decode_jpeg to RGB: one tensor of bytes, or a list decoded as a batch."""
    # imported here: torchvision takes 1.4 s to import, which every trainclock command would pay
    from torchvision.io import ImageReadMode, decode_jpeg as decode

    return decode(data, mode=ImageReadMode.RGB, device=device)


def decode_error(path: str, reason: object) -> DataError:
    """The one line a file that cannot be decoded raises, on the host or on the device."""
    return DataError(f"cannot decode image {path} ({reason}); replace or delete the file")


def decode_on_host(path: str) -> torch.Tensor:
    """PIL's uint8 CHW RGB decode of any image file."""
    try:
        with Image.open(path) as image:
            rgb = image.convert("RGB")  # forces the full decode: a truncated file fails here
    except DECODE_ERRORS as e:
        raise decode_error(path, e) from None
    return torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1)


def read(path: str) -> tuple[torch.Tensor, int, int]:
    """(bytes, width, height) of a JPEG, its size from the header only; a file in another format
    (ImageNet's train set holds a PNG under a .JPEG name, the CPU tiers write PNGs) is decoded here
    by PIL, since decode_jpeg reads only JPEGs: (uint8 CHW, width, height)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        with Image.open(io.BytesIO(raw)) as header:  # parses the header only: no pixel is decoded
            width, height = header.size
    except DECODE_ERRORS as e:
        raise decode_error(path, e) from None
    if raw[:2] != JPEG_START:  # by content, not PIL's format name (a camera's JPEG opens as "MPO")
        return decode_on_host(path), width, height
    # frombuffer warns on read-only bytes: a bytearray (one copy of the file) is writable
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8), width, height


def _reason(e: RuntimeError) -> str:
    """decode_jpeg's message without its C++ source location: 'decode_jpeg, <file>:<line>, <reason>'."""
    return str(e).strip().splitlines()[-1].rsplit(", ", 1)[-1]


class DeviceJpegDecoder:
    """Decodes loaders' encoded images on `device`, `chunk` at a time. One per loader thread (train,
    eval): on CUDA each owns a stream, on which run() does a batch's work for the loop's stream."""

    def __init__(self, device: torch.device, chunk: int) -> None:
        self.device = device
        self.chunk = max(1, chunk)  # images decoded at once: bounds the full-size decodes held on the device
        cuda = device.type == "cuda"
        self._stream = torch.cuda.Stream(device) if cuda else None
        # the stream the loop consumes batches on (the one current where the loader is built)
        self._consumer = torch.cuda.current_stream(device) if cuda else None
        self._lock = threading.Lock()  # one batch at a time on the stream (the synchronize points assume it)

    def run(self, work: Callable[[], torch.Tensor | list[torch.Tensor]]) -> torch.Tensor | list[torch.Tensor]:
        """work() (decodes and what the caller does with them) on this decoder's stream, complete
        before the loop's stream reads its tensors (a tensor or a list of them)."""
        if self._stream is None:
            return work()
        with self._lock, torch.cuda.stream(self._stream):
            out = work()
            self._stream.synchronize()  # the batch is complete before the loop's stream reads it (on this thread)
        for tensor in out if isinstance(out, list) else [out]:
            tensor.record_stream(self._consumer)  # its memory is not reused while the loop's stream may read it
        return out

    def decode(self, items: Sequence[Item], finish: Callable[[torch.Tensor, Item], torch.Tensor]) -> list[torch.Tensor]:
        """finish(uint8 CHW RGB on the device, item) of every item, in order, `chunk` decodes at a time."""
        out = []
        for start in range(0, len(items), self.chunk):
            part = items[start:start + self.chunk]
            out.extend(finish(image, item) for image, item in zip(self._decode_jpegs(part), part))
        return out

    def _decode_jpegs(self, items: Sequence[EncodedImage]) -> list[torch.Tensor]:
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
            images = decode_jpeg([items[i].data for i in jpegs], self.device)
        except RuntimeError:  # the batch fails as a whole: find the file, or the one the device cannot take
            images = [self._decode_one(items[i]) for i in jpegs]
        for i, image in zip(jpegs, images):
            decoded[i] = image
        return decoded

    def _decode_one(self, item: EncodedImage) -> torch.Tensor:
        """One JPEG on the device or, where nvJPEG refuses one that libjpeg-turbo reads, on the CPU;
        a file neither decodes is the one-line DataError, naming it."""
        try:
            return decode_jpeg(item.data, self.device)
        except RuntimeError as e:
            error = e
        if self.device.type != "cpu":
            try:
                return decode_jpeg(item.data).to(self.device)
            except RuntimeError as e:
                error = e
        raise decode_error(item.path, _reason(error)) from None
