"""Where a run's preprocessed .npy pairs come from, prepared once into the data home:

  CPU tier, no --data:   generated NIfTI cases (synthetic.py) -> preprocessing -> .npy, cached
                         under <data home>/prepared/unet3d-<tier>-<key>/{kits19,npy}/
  --data with NIfTI:     KiTS19 case folders -> preprocessing -> .npy, cached under
                         <data home>/prepared/unet3d-kits19-<key>/npy/ (key: the folder's path)
  --data with .npy:      read where they are

meta.json is written last: its presence means the cache is complete."""

from __future__ import annotations

import json
from pathlib import Path

from trainclock.errors import require_folder
from trainclock.storage import atomic_write_text, build_once, prepared_path
from trainclock.workloads.unet3d.data import kits19, synthetic

FORMAT_VERSION = 1
DATA_SEED = 2019  # the tiers' volumes depend on this alone, never on the run's seed


def tier_folder(name: str, cases: int, shape: tuple[int, int, int], patch: int) -> Path:
    return prepared_path(name, FORMAT_VERSION, cases, shape, patch, DATA_SEED)


def prepare_tier(name: str, cases: int, shape: tuple[int, int, int], patch: int, force: bool = False) -> Path:
    """The tier's .npy folder, generated and preprocessed first if missing."""

    def build(staging: Path) -> None:
        synthetic.generate(staging / "kits19", cases, shape, DATA_SEED)
        kits19.preprocess(staging / "kits19", staging / "npy", (patch,) * 3)
        atomic_write_text(staging / "meta.json", json.dumps({"cases": cases, "shape": shape, "patch": patch,
                                                              "seed": DATA_SEED, "version": FORMAT_VERSION}) + "\n")

    return build_once(tier_folder(name, cases, shape, patch), "meta.json", build, force) / "npy"


def is_nifti_tree(folder: Path) -> bool:
    return any(folder.glob("case_*/imaging.nii.gz")) or any(p.is_dir() for p in folder.glob("case_*"))


def prepare_official(folder: Path, patch: int, force: bool = False) -> Path:
    """The .npy folder for --data: the folder itself when it holds .npy pairs, else the cache of
    its NIfTI cases preprocessed (made now when missing)."""
    require_folder(folder, "pass --data with KiTS19 (case_XXXXX/imaging.nii.gz) or its preprocessed .npy pairs")
    if any(folder.glob("case_*_x.npy")) or any(folder.glob("case_*_y.npy")) or not is_nifti_tree(folder):
        return folder

    def build(staging: Path) -> None:
        count = kits19.preprocess(folder, staging / "npy", (patch,) * 3)
        atomic_write_text(staging / "meta.json", json.dumps({"source": str(folder.resolve()), "cases": count,
                                                              "version": FORMAT_VERSION}) + "\n")

    return build_once(prepared_path("unet3d-kits19", FORMAT_VERSION, folder.resolve(), patch), "meta.json", build,
                      force) / "npy"
