"""Bad ImageNet folders and image files are refused in one line naming the folder or file: a
folder with fewer than two classes or a val/ whose classes differ from train/'s at load (before
the run, not at the first evaluation), a decompression bomb on either decoding path, and any
damaged JPEG either decodes or is that one line."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from tests.workloads.resnet.trees import write_tree
from trainclock.distributed.layout import Layout
from trainclock.errors import DataError, UsageError
from trainclock.workload.base import RunSettings
from trainclock.workloads.resnet import WORKLOAD
from trainclock.workloads.resnet.data.device_decode import DeviceDecoder, eval_sample, train_sample
from trainclock.workloads.resnet.data.folder import scan
from trainclock.workloads.resnet.data.loader import EvalLoader, StepLoader
from trainclock.workloads.resnet.data.transforms import ImageTransforms, eval_image, train_image

SMALL = ImageTransforms(crop=16, resize=18)
CPU = torch.device("cpu")


def one_line(e: pytest.ExceptionInfo) -> str:
    message = str(e.value)
    assert message and "\n" not in message
    return message


# 1: fewer than two classes, or val/ classes that differ from train/'s

def test_a_one_class_folder_is_refused_at_load(tmp_path):
    root = write_tree(tmp_path / "data", classes=1, per_class=4, val_per_class=2)
    with pytest.raises(DataError, match=r"train has 1 class folder .*at least 2 classes") as e:
        scan(root)
    assert str(root / "train") in one_line(e)


@pytest.mark.parametrize("member", ["resnet-tiny", "resnet-50"])
def test_a_one_class_folder_is_refused_when_the_member_resolves(tmp_path, member):
    """Before the run starts (resolve runs before the machine is measured and run_start is logged),
    not at the first evaluation (torchmetrics: num_classes must be larger than 1)."""
    root = write_tree(tmp_path / "data", classes=1, per_class=4, val_per_class=2)
    with pytest.raises(DataError, match="at least 2 classes"):
        WORKLOAD.resolve(member, RunSettings(data=str(root), extra={"loader_workers": 0}), Layout(), CPU)


def test_a_val_folder_lacking_a_train_class_is_refused(tmp_path):
    root = write_tree(tmp_path / "data", classes=3)
    for path in (root / "val" / "n00000002").iterdir():
        path.unlink()
    (root / "val" / "n00000002").rmdir()
    with pytest.raises(DataError, match=r"lacks class folders that train/ has \(n00000002\)") as e:
        scan(root)
    assert str(root / "val") in one_line(e)


def test_an_empty_val_class_folder_is_still_the_same_classes(tmp_path):
    root = write_tree(tmp_path / "data", classes=3)
    for path in (root / "val" / "n00000002").iterdir():
        path.unlink()
    folder = scan(root)
    assert folder.classes == ("n00000000", "n00000001", "n00000002") and set(folder.val.labels) == {0, 1}


def test_sample_data_has_two_classes_and_the_same_class_folders_in_both_splits(tmp_path):
    with pytest.raises(UsageError, match="at least 2"):
        WORKLOAD.write_sample_data("resnet-tiny", tmp_path / "one", samples=1, seed=0)
    folder = scan(WORKLOAD.write_sample_data("resnet-tiny", tmp_path / "two", samples=2, seed=0))
    assert len(folder.classes) == 2 and len(folder.val) == 1


# 2: decompression bombs, on the PIL path and the device path

def jpeg_bomb(path: Path, width: int, height: int) -> None:
    """A small JPEG whose header claims width x height."""
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (10, 20, 30)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    path.write_bytes(bytes(data))


def png_bomb(path: Path, width: int, height: int) -> None:
    """A valid few-KB 1-bit PNG of width x height zeros (ImageNet holds a PNG under a .JPEG name)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = zlib.compress(b"\x00" * (width // 8 + 2) * 4)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
                     + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


@pytest.mark.parametrize("bomb", [jpeg_bomb, png_bomb])
@pytest.mark.parametrize("on_device", [False, True], ids=["pil", "device"])
def test_a_decompression_bomb_is_one_line_naming_the_file_on_either_path(tmp_path, bomb, on_device):
    folder = scan(write_tree(tmp_path / "data", classes=2, per_class=1, val_per_class=1))
    for path in folder.train.files + folder.val.files:
        bomb(Path(path), 20_000, 20_000)  # 400 MP: over PIL's 179 MP limit
    decoder = DeviceDecoder(CPU, SMALL, chunk=4) if on_device else None
    train = StepLoader(folder.train, SMALL, seed=0, global_batch=2, rows=slice(0, 2), workers=0, decoder=decoder)
    with pytest.raises(DataError, match="decompression bomb") as e:
        train(0, slice(0, 2))
    assert folder.train.files[0] in one_line(e) and "replace or delete" in str(e.value)
    with pytest.raises(DataError, match="decompression bomb") as e:
        list(EvalLoader(folder.val, SMALL, micro=2, shard=(0, 1), workers=0, decoder=decoder))
    assert folder.val.files[0] in one_line(e)


# fuzz: damaged JPEGs (and PNGs under a .JPEG name) either decode or are DataError

def _encoded(fmt: str, mode: str, size: tuple[int, int], seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], len(mode)), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels.squeeze(-1) if mode == "L" else pixels, mode).save(buf, fmt)
    return buf.getvalue()


ORIGINALS = [_encoded("JPEG", "RGB", (40, 32), 0), _encoded("JPEG", "L", (28, 28), 1),
             _encoded("JPEG", "CMYK", (20, 30), 2), _encoded("PNG", "RGB", (24, 24), 3)]

DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)),
                                             min_size=1, max_size=12)),
    st.tuples(st.just("size"), st.tuples(st.integers(0, 65535), st.integers(0, 65535))),
    st.tuples(st.just("bytes"), st.binary(max_size=300)),
)


def damage(data: bytes, how) -> bytes:
    kind, detail = how
    if kind == "cut":
        return data[:int(len(data) * detail)]
    if kind == "bytes":
        return detail
    data = bytearray(data)
    if kind == "size":  # the header's width and height (JPEG SOF0, PNG IHDR)
        width, height = detail
        if data[:2] == b"\xff\xd8":
            at = data.index(b"\xff\xc0") + 5
            data[at:at + 4] = struct.pack(">HH", height, width)
        else:
            data[16:24] = struct.pack(">II", width, height)
        return bytes(data)
    for where, new in detail:
        at = int(where * (len(data) - 1))
        data[at:at + len(new)] = new
    return bytes(data)


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory) -> Path:
    return write_tree(tmp_path_factory.mktemp("fuzz"), classes=2, per_class=1, val_per_class=1)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(range(len(ORIGINALS))), how=DAMAGE)
def test_a_damaged_image_decodes_or_is_one_line_on_either_path(small_tree, which, how):
    folder = scan(small_tree)
    path = folder.train.files[0]
    Path(path).write_bytes(damage(ORIGINALS[which], how))
    decoder = DeviceDecoder(CPU, SMALL, chunk=4)
    for decode in (lambda: train_image(path, SMALL, np.random.default_rng(0)),
                   lambda: eval_image(path, SMALL),
                   lambda: decoder([train_sample(path, SMALL, np.random.default_rng(0))]),
                   lambda: decoder([eval_sample(path)])):
        try:
            image = decode()
        except DataError as e:
            assert path in str(e) and "\n" not in str(e)
        else:
            assert image.dtype == torch.uint8 and image.shape[-3:] == (3, 16, 16)
