"""Bad KiTS19 files are refused at load, in one line naming the file: labels other than 0/1/2
(in the .npy pairs, and NIfTI float labels that a cast to uint8 would wrap), a voxel spacing that
is not finite, positive and sane or that would resample past the size bound (before anything is
allocated for it), a 4-D volume; and any damaged NIfTI case or .npy pair either loads or is that
one line."""

from __future__ import annotations

import functools
import gzip
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainclock.errors import DataError
from trainclock.workloads.unet3d.data import kits19, synthetic
from trainclock.workloads.unet3d.data.npy import load_split

SHAPE = (6, 7, 8)
PATCH = (4, 4, 4)


def one_line(e: pytest.ExceptionInfo) -> str:
    message = str(e.value)
    assert message and "\n" not in message
    return message


def write_case(folder: Path, name: str = "case_00000", image: np.ndarray | None = None,
               label: np.ndarray | None = None, spacing=(3.2, 2.4, 2.4)) -> Path:
    rng = np.random.default_rng(0)
    image = rng.uniform(-300, 500, size=SHAPE).astype(np.float32) if image is None else image
    label = rng.integers(0, 3, size=image.shape).astype(np.uint8) if label is None else label
    synthetic.write_nifti_case(folder / name, image, label, spacing)
    return folder / name


def edit_header(path: Path, **fields) -> None:
    """Overwrite NIfTI-1 header fields of a .nii.gz in place: dim (8 int16), pixdim (8 float32)."""
    raw = bytearray(gzip.decompress(path.read_bytes()))
    if "dim" in fields:
        raw[40:56] = struct.pack("<8h", *fields["dim"])
    if "pixdim" in fields:
        raw[76:108] = struct.pack("<8f", *fields["pixdim"])
    path.write_bytes(gzip.compress(bytes(raw)))


def preprocess(folder: Path) -> int:
    return kits19.preprocess(folder, folder.parent / "npy", PATCH)


# 3: .npy labels above 2

def test_npy_labels_above_2_are_refused_at_load(tmp_path):
    label = np.zeros((1, 8, 8, 8), np.uint8)
    label[0, 1, 2, 3] = 7
    kits19.save_pair(tmp_path, "case_00000", np.zeros((1, 8, 8, 8), np.float32), np.zeros((1, 8, 8, 8), np.uint8))
    kits19.save_pair(tmp_path, "case_00001", np.zeros((1, 8, 8, 8), np.float32), label)
    with pytest.raises(DataError, match="labels must be 0, 1 or 2.*found 7") as e:
        load_split(tmp_path, ["00000"], (8, 8, 8))
    assert str(tmp_path / "case_00001_y.npy") in one_line(e)


def test_nifti_labels_above_2_are_refused(tmp_path):
    label = np.zeros(SHAPE, np.uint8)
    label[1, 1, 1] = 3
    case = write_case(tmp_path / "kits19", label=label)
    with pytest.raises(DataError, match=r"1 voxels have labels other than 0, 1, 2.*: 3;") as e:
        preprocess(tmp_path / "kits19")
    assert str(case / "segmentation.nii.gz") in one_line(e)


# 4: pixdim

@pytest.mark.parametrize("spacing", [1000.0, float("nan"), float("inf"), 0.0, -1.2, 0.01])
def test_an_insane_pixdim_is_refused_before_resampling(tmp_path, spacing):
    case = write_case(tmp_path / "kits19")
    edit_header(case / "imaging.nii.gz", pixdim=(1.0, 3.2, spacing, 2.4, 1.0, 1.0, 1.0, 1.0))
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"voxel spacing \(pixdim\) .* is not 3 finite sizes of 0.1-20 mm") as e:
        preprocess(tmp_path / "kits19")
    assert str(case / "imaging.nii.gz") in one_line(e) and time.perf_counter() - start < 5


def test_a_resampled_size_past_the_bound_is_refused(tmp_path):
    case = write_case(tmp_path / "kits19", image=np.zeros((100, 100, 100), np.float32),
                      label=np.zeros((100, 100, 100), np.uint8), spacing=(20.0, 20.0, 20.0))
    with pytest.raises(DataError, match=r"would make 3,4\d\d,\d{3},\d{3} voxels, over the 1,073,741,824") as e:
        preprocess(tmp_path / "kits19")
    assert str(case / "imaging.nii.gz") in one_line(e)
    with pytest.raises(DataError, match="over the"):  # resample itself is bounded too
        kits19.resample(np.zeros((1, 100, 100, 100), np.float32), np.zeros((1, 100, 100, 100), np.float32),
                        (20.0, 20.0, 20.0))


def test_a_header_claiming_more_voxels_than_the_file_holds_is_refused_without_allocating_them(tmp_path):
    case = write_case(tmp_path / "kits19")
    for name in ("imaging.nii.gz", "segmentation.nii.gz"):
        edit_header(case / name, dim=(3, 500, 500, 500, 1, 1, 1, 1))  # resampled: 1.0G voxels, in bounds
    start = time.perf_counter()
    with pytest.raises(DataError, match="header needs 500,000,352: the file is cut short") as e:
        preprocess(tmp_path / "kits19")
    assert str(case / "imaging.nii.gz") in one_line(e) and time.perf_counter() - start < 2


# 5: float labels that a uint8 cast would wrap or truncate

@pytest.mark.parametrize("value, shown", [(300.0, "300"), (1.5, "1.5"), (-1.0, "-1"), (float("nan"), "nan")])
def test_float_nifti_labels_must_be_0_1_or_2(tmp_path, value, shown):
    label = np.zeros(SHAPE, np.float32)
    label[2, 3, 4] = value
    label[0, 0, 0] = 2.0
    case = write_case(tmp_path / "kits19", label=label)
    with pytest.raises(DataError, match=f"1 voxels have labels other than 0, 1, 2 .*: {shown};") as e:
        preprocess(tmp_path / "kits19")
    assert str(case / "segmentation.nii.gz") in one_line(e)


def test_integral_float_labels_are_read(tmp_path):
    label = np.zeros(SHAPE, np.float32)
    label[0, 0, 0], label[1, 1, 1] = 1.0, 2.0
    write_case(tmp_path / "kits19", label=label, spacing=kits19.TARGET_SPACING)
    assert preprocess(tmp_path / "kits19") == 1
    y = np.load(tmp_path / "npy/case_00000_y.npy")
    assert y.dtype == np.uint8 and set(np.unique(y)) == {0, 1, 2}


# 6: a 4-D volume

@pytest.mark.parametrize("which", ["imaging.nii.gz", "segmentation.nii.gz"])
def test_a_4d_nifti_is_named_as_4d(tmp_path, which):
    import nibabel

    case = write_case(tmp_path / "kits19")
    volume = nibabel.Nifti1Image(np.zeros((*SHAPE, 2), np.float32), np.diag([3.2, 2.4, 2.4, 1.0]))
    (case / which).write_bytes(gzip.compress(volume.to_bytes()))
    with pytest.raises(DataError, match=r"a 4-D volume \(6, 7, 8, 2\); a KiTS19 case is one 3-D volume") as e:
        preprocess(tmp_path / "kits19")
    assert str(case / which) in one_line(e) and "differ in shape" not in str(e.value)


# fuzz: damaged NIfTI cases and .npy pairs load or are one DataError line

def damage(data: bytes, how, header: int) -> bytes:
    kind, detail = how
    if kind == "cut":
        return data[:int(len(data) * detail)]
    data = bytearray(data)
    if kind in ("int16", "float32"):  # a header field (dims, datatype, pixdim, offset, scaling)
        where, value = detail
        at = min(where, header - 4)
        new = struct.pack("<h", value) if kind == "int16" else struct.pack("<f", value)
        data[at:at + len(new)] = new
        return bytes(data)
    for where, new in detail:  # bytes overwritten, mostly in the header
        at = int(where * (min(len(data), header + 64) - 1))
        data[at:at + len(new)] = new
    return bytes(data)


DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)),
                                             min_size=1, max_size=8)),
    st.tuples(st.just("int16"), st.tuples(st.sampled_from([0, 40, 42, 44, 46, 48, 70, 72]),  # dim, datatype, bitpix
                                          st.integers(-2**15, 2**15 - 1))),
    st.tuples(st.just("float32"), st.tuples(st.sampled_from([80, 84, 88, 108, 112, 116]),  # pixdim, offset, scaling
                                            st.floats(width=32))),
)


@functools.cache
def originals() -> dict[str, bytes]:
    """A valid case's files: its NIfTI (uncompressed) and its preprocessed .npy pair."""
    root = Path(tempfile.mkdtemp(prefix="unet3d-originals-"))
    case = write_case(root / "kits19")
    kits19.preprocess(root / "kits19", root / "npy", PATCH)
    files = {name: gzip.decompress((case / name).read_bytes()) for name in ("imaging.nii.gz", "segmentation.nii.gz")}
    files.update({name: (root / "npy" / name).read_bytes() for name in ("case_00000_x.npy", "case_00000_y.npy")})
    shutil.rmtree(root)
    return files


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["imaging.nii.gz", "segmentation.nii.gz"]), how=DAMAGE, gzipped=st.booleans())
def test_a_damaged_nifti_case_preprocesses_or_is_one_line(tmp_path_factory, which, how, gzipped):
    root = tmp_path_factory.mktemp("nifti")
    case = root / "kits19" / "case_00000"
    case.mkdir(parents=True)
    for name in ("imaging.nii.gz", "segmentation.nii.gz"):
        data = damage(originals()[name], how, 352) if name == which else originals()[name]
        # the damage is to the NIfTI inside, or (a cut) to the .gz itself
        (case / name).write_bytes(gzip.compress(data) if gzipped or how[0] != "cut" or name != which
                                  else gzip.compress(originals()[name])[:len(data) // 2])
    try:
        assert preprocess(root / "kits19") == 1
    except DataError as e:
        assert str(case) in str(e) and "\n" not in str(e)
    else:
        y = np.load(root / "npy/case_00000_y.npy")
        assert y.dtype == np.uint8 and y.max() <= 2


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["case_00000_x.npy", "case_00000_y.npy"]), how=DAMAGE)
def test_a_damaged_npy_pair_loads_or_is_one_line(tmp_path_factory, which, how):
    folder = tmp_path_factory.mktemp("npy")
    for name in ("case_00000_x.npy", "case_00000_y.npy"):  # 00000: an evaluation case; 00001 trains
        data = originals()[name]
        (folder / name).write_bytes(damage(data, how, 128) if name == which else data)
        (folder / name.replace("00000", "00001")).write_bytes(data)
    try:
        split = load_split(folder, ["00000"], PATCH)
    except DataError as e:
        assert str(folder) in str(e) and "\n" not in str(e)
    else:
        case = split.eval[0]
        assert case.label.dtype == np.uint8 and int(case.label.max()) <= 2 and case.image.dtype == np.float32
