"""KiTS19 NIfTI cases and the reference's preprocessed .npy pairs, written here as tiny files:
preprocessing resamples to the target spacing, clips and normalises as the reference does and
pads to the patch; the loader splits by the evaluation list; bad files are one DataError line."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from trainclock.errors import DataError
from trainclock.workloads.unet3d.data import kits19, synthetic
from trainclock.workloads.unet3d.data.npy import load_split, reference_eval_cases
from trainclock.workloads.unet3d.data.prepare import prepare_official


def nifti_case(folder, name="case_00000", shape=(10, 12, 14), spacing=(3.2, 2.4, 2.4)):
    rng = np.random.default_rng(0)
    image = rng.uniform(-300, 500, size=shape).astype(np.float32)
    label = (rng.random(shape) < 0.2).astype(np.uint8) * rng.integers(1, 3, size=shape).astype(np.uint8)
    synthetic.write_nifti_case(folder / name, image, label, spacing)
    return image, label


def test_nifti_case_is_resampled_clipped_normalised_and_padded(tmp_path):
    image, label = nifti_case(tmp_path / "kits19")
    assert kits19.preprocess(tmp_path / "kits19", tmp_path / "npy", (16, 16, 32)) == 1
    x, y = np.load(tmp_path / "npy/case_00000_x.npy"), np.load(tmp_path / "npy/case_00000_y.npy")
    assert x.dtype == np.float32 and y.dtype == np.uint8
    # spacing 3.2 x 2.4 x 2.4 -> 1.6 x 1.2 x 1.2 doubles every axis; the last is then padded 28 -> 32
    assert x.shape == y.shape == (1, 20, 24, 32)
    inner = x[0, :, :, 2:30]  # edge padding: 2 voxels each side
    assert inner.min() >= (kits19.MIN_CLIP_VAL - kits19.MEAN_VAL) / kits19.STDDEV_VAL - 1e-6
    assert inner.max() <= (kits19.MAX_CLIP_VAL - kits19.MEAN_VAL) / kits19.STDDEV_VAL + 1e-6
    # align_corners trilinear keeps the corner voxel; nearest keeps labels 0/1/2
    assert inner[0, 0, 0] == pytest.approx(kits19.normalize(image[0, 0, 0]), abs=1e-5)
    assert set(np.unique(y)) <= {0, 1, 2} and y[0, 0, 0, 2] == label[0, 0, 0]


def test_npy_pairs_split_by_the_evaluation_list(tmp_path):
    ids = ["00000", "00001", "00003"]  # 00000 and 00003 are reference evaluation cases
    for i in ids:
        kits19.save_pair(tmp_path, f"case_{i}", np.zeros((1, 8, 8, 8), np.float32), np.zeros((1, 8, 8, 8), np.uint8))
    split = load_split(tmp_path, reference_eval_cases(), (8, 8, 8))
    assert [c.name for c in split.train] == ["case_00001"]
    assert [c.name for c in split.eval] == ["case_00000", "case_00003"]
    assert len(reference_eval_cases()) == 42


def test_a_nifti_folder_as_data_is_preprocessed_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINCLOCK_HOME", str(tmp_path / "home"))
    for name in ("case_00000", "case_00002"):
        nifti_case(tmp_path / "kits19", name, spacing=(1.6, 1.2, 1.2))
    folder = prepare_official(tmp_path / "kits19", 8)
    assert folder.is_relative_to(tmp_path / "home") and sorted(p.name for p in folder.iterdir()) == [
        "case_00000_x.npy", "case_00000_y.npy", "case_00002_x.npy", "case_00002_y.npy"]
    assert prepare_official(folder, 8) == folder  # .npy pairs are read where they are


def write_pair(folder, name="case_00000", x_shape=(1, 8, 8, 8), y_shape=(1, 8, 8, 8)):
    kits19.save_pair(folder, name, np.zeros(x_shape, np.float32), np.zeros(y_shape, np.uint8))


@pytest.mark.parametrize("damage, message", [
    ("missing_y", "case_00001_y.npy is missing"),
    ("shape", "must both be 1xDxHxW and equal"),
    ("corrupt", "unreadable .npy"),
    ("small", "smaller than the patch"),
    ("empty", "no case_XXXXX_x.npy"),
])
def test_bad_npy_data_is_one_clear_line(tmp_path, damage, message):
    if damage != "empty":
        write_pair(tmp_path, "case_00000")
        write_pair(tmp_path, "case_00001")
    if damage == "missing_y":
        (tmp_path / "case_00001_y.npy").unlink()
    if damage == "shape":
        write_pair(tmp_path, "case_00001", y_shape=(1, 8, 8, 9))
    if damage == "corrupt":
        (tmp_path / "case_00001_x.npy").write_bytes(b"\x93NUMPY garbage")
    patch = (16, 16, 16) if damage == "small" else (8, 8, 8)
    with pytest.raises(DataError, match=message) as e:
        load_split(tmp_path, ["00000"], patch)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("damage, message", [
    ("missing", "segmentation.nii.gz is missing"),
    ("corrupt", "unreadable NIfTI"),
    ("shape", "differ in shape"),
])
def test_bad_nifti_cases_are_one_clear_line(tmp_path, damage, message):
    nifti_case(tmp_path)
    case = tmp_path / "case_00000"
    if damage == "missing":
        (case / "segmentation.nii.gz").unlink()
    if damage == "corrupt":
        (case / "imaging.nii.gz").write_bytes(gzip.compress(b"not a nifti header"))
    if damage == "shape":
        synthetic.write_nifti_case(tmp_path / "other", np.zeros((4, 4, 4), np.float32), np.zeros((4, 4, 5), np.uint8))
        (tmp_path / "other/segmentation.nii.gz").replace(case / "segmentation.nii.gz")
    with pytest.raises(DataError, match=message) as e:
        kits19.preprocess(tmp_path, tmp_path / "npy", (8, 8, 8))
    assert "\n" not in str(e.value)
