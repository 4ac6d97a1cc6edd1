"""The CPU tiers' KiTS19 stand-in: abdomen-like CT volumes generated from a seed and written as
KiTS19 NIfTI cases, so they go through the same preprocessing and loader as the real data.

Each case, in Hounsfield units at a coarser spacing than the target: air, a body of fat around
soft tissue, one or two ellipsoid kidneys (label 1, bright: contrast-enhanced cortex) and a tumour
(label 2) growing from one kidney, darker than the kidney and close to the soft tissue, so telling
it apart needs the shape and context and not only the intensity. Intensities vary per case;
Gaussian noise and a smooth additive bias field vary per voxel, as scanners do."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SPACING = (2.0, 1.5, 1.5)  # mm; resampled to the target (1.6, 1.2, 1.2): 1.25x per axis


def make_case(rng: np.random.Generator, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(image in HU float32, label uint8) of one generated case."""
    axes = [np.linspace(-1.0, 1.0, n, dtype=np.float32) for n in shape]
    z, y, x = np.meshgrid(*axes, indexing="ij")
    image = np.full(shape, -1000.0, dtype=np.float32)
    body = (z / 1.1) ** 2 + (y / 0.9) ** 2 + (x / 0.95) ** 2 < 1.0
    image[body] = -100.0 + rng.normal(0, 10)
    inner = (z / 1.0) ** 2 + (y / 0.75) ** 2 + (x / 0.8) ** 2 < 1.0
    image[inner] = 40.0 + rng.normal(0, 8)
    label = np.zeros(shape, dtype=np.uint8)
    sides = [-1, 1] if rng.random() < 0.7 else [rng.choice([-1, 1])]
    kidneys = []
    for side in sides:
        centre = np.array([rng.uniform(-0.25, 0.25), rng.uniform(-0.1, 0.2), side * rng.uniform(0.42, 0.52)])
        radii = np.array([rng.uniform(0.4, 0.55), rng.uniform(0.28, 0.38), rng.uniform(0.22, 0.3)])
        inside = ((z - centre[0]) / radii[0]) ** 2 + ((y - centre[1]) / radii[1]) ** 2 + ((x - centre[2]) / radii[2]) ** 2 < 1
        image[inside] = rng.uniform(150, 210)
        label[inside] = 1
        kidneys.append((centre, radii))
    centre, radii = kidneys[rng.integers(len(kidneys))]
    offset = rng.uniform(-0.6, 0.6, size=3) * radii
    radius = rng.uniform(0.7, 1.0) * radii.min()
    tumour = ((z - centre[0] - offset[0]) ** 2 + (y - centre[1] - offset[1]) ** 2
              + (x - centre[2] - offset[2]) ** 2) < radius ** 2
    image[tumour] = rng.uniform(70, 110)
    label[tumour] = 2
    bias = sum(rng.uniform(-20, 20) * np.cos(np.pi * (rng.uniform(0.3, 1.0) * a + rng.uniform(0, 2))) for a in (z, y, x))
    image += bias + rng.normal(0, 20, size=shape).astype(np.float32)
    return image.astype(np.float32), label


def write_nifti_case(folder: Path, image: np.ndarray, label: np.ndarray,
                     spacing: tuple[float, float, float] = SPACING) -> None:
    """One KiTS19 case folder (imaging.nii.gz, segmentation.nii.gz) with `spacing` in pixdim."""
    import nibabel

    from trainclock.storage import atomic_writer

    folder.mkdir(parents=True, exist_ok=True)
    affine = np.diag([*spacing, 1.0])
    for name, array in (("imaging.nii.gz", image), ("segmentation.nii.gz", label)):
        nifti = nibabel.Nifti1Image(array, affine)
        nifti.header.set_zooms(spacing)
        with atomic_writer(folder / name, "wb") as f:
            f.write(nifti.to_bytes() if not name.endswith(".gz") else _gzip(nifti.to_bytes()))


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, compresslevel=1, mtime=0)  # mtime 0: the same seed gives the same bytes


def generate(folder: Path, cases: int, shape: tuple[int, int, int], seed: int) -> None:
    """`cases` NIfTI cases case_00000 ... into `folder`, each a function of (seed, case id) alone."""
    for i in range(cases):
        rng = np.random.default_rng([seed, i])
        jitter = rng.integers(-3, 4, size=3)  # shapes differ a little between cases, as real scans do
        image, label = make_case(rng, tuple(int(s + j) for s, j in zip(shape, jitter)))
        write_nifti_case(folder / f"case_{i:05d}", image, label)
