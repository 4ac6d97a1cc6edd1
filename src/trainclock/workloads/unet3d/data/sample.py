"""Made-up KiTS19 as the reference's preprocessing leaves it (case_XXXXX_x.npy float32 and _y.npy
uint8, 1xDxHxW at 1.6 x 1.2 x 1.2 mm, written by kits19.save_pair): a member's sample data
(Workload.write_sample_data), which measures the host pipeline at full size without KiTS19.

Shapes: a KiTS19 scan is 512 x 512 pixels of 0.6-0.9 mm over some 220-420 mm of abdomen; resampled
that is a volume of about 140-260 x 265-390 x 265-390 voxels, on average 200 x 330 x 330 = 21.6M
voxels: 86 MB of image and 22 MB of labels, ~108 MB a case (56 cases: ~6 GB). The loader crops
one patch per case per sample and visits each case once an epoch, so a global batch of 56 reads
56 different cases: `samples` cases are written, each of a real case's size, so that a batch
reads what a real one reads. The CPU tiers' volumes take their own generated shape, resampled.

Contents (synthetic.make_case's abdomen, cut down to be cheap at 22M voxels: 4.5 s a case there,
~0.2 s here): air around an elliptic body of fat and soft tissue, two ellipsoid kidneys (label 1)
and a tumour on one of them (label 2), a smooth bias field and noise, in HU, then clipped and
normalised as the reference does. Random: no target is reachable on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.workloads.unet3d.data import kits19, synthetic
from trainclock.workloads.unet3d.spec import Unet3DSpec

NOISE_SLICES = 7  # noise is drawn for this many slices and reused along the depth: a full draw costs 3x the rest


def write_sample(spec: Unet3DSpec, folder: Path, samples: int, seed: int, scale: float = 1.0) -> str:
    """`samples` training cases and one evaluation case (the fewest the job accepts) into `folder`;
    the --data value that runs the member on them. `scale` multiplies every volume's sides (tests:
    0.5 writes an eighth of the bytes); a side below the patch is edge-padded to it, as the
    reference's preprocessing pads small cases, so patches keep the member's size."""
    folder.mkdir(parents=True, exist_ok=True)
    held_out = set(spec.eval_cases)
    train = [i for i in range(samples + len(held_out)) if f"{i:05d}" not in held_out][:samples]
    for number in (int(spec.eval_cases[0]), *train):  # the member's first evaluation case, then the training ones
        rng = np.random.default_rng([seed, number])
        image, label = make_case(rng, volume_shape(spec, rng, scale))
        if any(n < p for n, p in zip(image.shape[1:], spec.patch_shape)):  # np.pad copies even when it pads nothing
            image, label = kits19.pad_to(image, label, spec.patch_shape)
        kits19.save_pair(folder, f"case_{number:05d}", image, label)
    return str(folder)


def volume_shape(spec: Unet3DSpec, rng: np.random.Generator, scale: float) -> tuple[int, int, int]:
    """A preprocessed case's shape (D, H, W) at the target spacing, drawn around the member's typical one."""
    if spec.dataset == "kits19":
        depth_mm, pixel_mm = rng.uniform(220, 420), rng.uniform(0.62, 0.92)
        shape = (depth_mm / kits19.TARGET_SPACING[0], *(512 * pixel_mm / s for s in kits19.TARGET_SPACING[1:]))
    else:  # the tier's generated NIfTI shape, jittered as synthetic.generate does, then resampled
        jitter = rng.integers(-3, 4, size=3)
        shape = tuple((n + j) * g / t for n, j, g, t in
                      zip(spec.generated_shape, jitter, synthetic.SPACING, kits19.TARGET_SPACING))
    return tuple(max(1, round(n * scale)) for n in shape)  # type: ignore[return-value]


def make_case(rng: np.random.Generator, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(normalised image float32 1xDxHxW, label uint8 1xDxHxW) of one case. Whole-volume work is
    a few passes: the body is a cylinder (one 2-D map copied along the depth), kidneys and
    tumour are drawn inside their bounding boxes, the bias field is separable."""
    depth, height, width = shape
    z, y, x = (np.linspace(-1.0, 1.0, n, dtype=np.float32) for n in shape)
    y2, x2 = y[:, None], x[None, :]
    plane = np.full((height, width), -1000.0, dtype=np.float32)
    plane[(y2 / 0.9) ** 2 + (x2 / 0.95) ** 2 < 1] = -100.0 + rng.normal(0, 10)  # fat
    plane[(y2 / 0.75) ** 2 + (x2 / 0.8) ** 2 < 1] = 40.0 + rng.normal(0, 8)  # soft tissue
    bias_z, bias_y, bias_x = (rng.uniform(-20, 20) * np.cos(np.pi * (rng.uniform(0.3, 1.0) * a + rng.uniform(0, 2)))
                              for a in (z, y, x))
    plane += bias_y[:, None] + bias_x[None, :]
    image = plane[None] + bias_z[:, None, None]
    label = np.zeros(shape, dtype=np.uint8)
    kidneys = []
    for side in (-1, 1) if rng.random() < 0.7 else (rng.choice([-1, 1]),):
        centre = np.array([rng.uniform(-0.25, 0.25), rng.uniform(-0.1, 0.2), side * rng.uniform(0.42, 0.52)])
        radii = np.array([rng.uniform(0.25, 0.35), rng.uniform(0.12, 0.17), rng.uniform(0.11, 0.15)])
        _fill(image, label, (z, y, x), centre, radii, rng.uniform(150, 210), 1)
        kidneys.append((centre, radii))
    centre, radii = kidneys[rng.integers(len(kidneys))]
    tumour = centre + rng.uniform(-0.6, 0.6, size=3) * radii
    _fill(image, label, (z, y, x), tumour, rng.uniform(0.7, 1.0) * radii, rng.uniform(70, 110), 2)
    noise = rng.normal(0, 20, size=(NOISE_SLICES, height, width)).astype(np.float32)
    for d in range(depth):
        image[d] += noise[d % NOISE_SLICES]
    return kits19.normalize(image)[None], label[None]


def _fill(image: np.ndarray, label: np.ndarray, axes: tuple[np.ndarray, ...], centre: np.ndarray,
          radii: np.ndarray, value: float, cls: int) -> None:
    """Set the ellipsoid (centre, radii, in the axes' -1..1 units) to `value` and class `cls`,
    touching only its bounding box."""
    box = tuple(slice(int(np.searchsorted(a, c - r)), int(np.searchsorted(a, c + r, side="right")))
                for a, c, r in zip(axes, centre, radii))
    local = [a[b] for a, b in zip(axes, box)]
    inside = (((local[0] - centre[0]) / radii[0]) ** 2)[:, None, None] \
        + (((local[1] - centre[1]) / radii[1]) ** 2)[None, :, None] \
        + (((local[2] - centre[2]) / radii[2]) ** 2)[None, None, :] < 1
    image[box][inside] = value
    label[box][inside] = cls
