"""The training patches of each optimizer step, as the reference's loader makes them
(data_loading/pytorch_loader.py): a random crop of the patch shape, centred on a foreground
object with probability `oversampling` (a class present in the case, then one of its two largest
connected components), then random flips on each axis (p 1/3), brightness scaling (p 0.1,
factor in [0.7, 1.3]) and Gaussian noise (p 0.1, std up to 0.1).

Sample i of the run (counted over all steps) is case perm(seed, epoch)[i mod cases] with its own
random stream (seed, i): a step's global batch is a function of (seed, step) alone, so any number
of data-parallel ranks, and a resumed run, see the same patches."""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from trainclock.workloads.unet3d.data.npy import Case


class PatchSampler:
    def __init__(self, cases: list[Case], patch: tuple[int, int, int], oversampling: float, seed: int) -> None:
        self.cases, self.patch, self.oversampling, self.seed = cases, patch, oversampling, seed
        self._objects = cache(self._foreground_objects)

    def case_of(self, sample: int) -> int:
        epoch, position = divmod(sample, len(self.cases))
        return int(_permutation(self.seed, epoch, len(self.cases))[position])

    def sample(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        case_index = self.case_of(index)
        case = self.cases[case_index]
        rng = np.random.default_rng([self.seed, 1, index])
        objects = self._objects(case_index)
        if rng.random() < self.oversampling and objects:
            classes = sorted(objects)
            boxes = objects[classes[rng.integers(len(classes))]]
            corner = self._around(boxes[rng.integers(len(boxes))], case.image.shape[1:], rng)
        else:
            corner = [int(rng.integers(s - p + 1)) for s, p in zip(case.image.shape[1:], self.patch)]
        window = (slice(None), *(slice(c, c + p) for c, p in zip(corner, self.patch)))
        image, label = np.array(case.image[window], dtype=np.float32), np.array(case.label[window], dtype=np.uint8)
        for axis in (1, 2, 3):
            if rng.random() < 1 / 3:
                image, label = np.flip(image, axis), np.flip(label, axis)
        if rng.random() < 0.1:
            image = image * np.float32(1 + rng.uniform(0.7, 1.3))  # the reference scales by (1 + factor)
        if rng.random() < 0.1:
            image = image + rng.normal(0.0, rng.uniform(0.0, 0.1), size=image.shape).astype(np.float32)
        return np.ascontiguousarray(image), np.ascontiguousarray(label)

    def batch(self, step: int, size: int, rows: slice = slice(None)) -> dict[str, torch.Tensor]:
        """Rows `rows` of step `step`'s global batch of `size` patches: only those are cropped."""
        pairs = [self.sample(step * size + i) for i in range(*rows.indices(size))]
        return {"image": torch.from_numpy(np.stack([p[0] for p in pairs])),
                "label": torch.from_numpy(np.stack([p[1] for p in pairs]))}

    def _foreground_objects(self, case_index: int) -> dict[int, list[tuple[slice, ...]]]:
        """Per foreground class present, the bounding boxes of its two largest connected components."""
        import scipy.ndimage  # here, when a case is first sampled: the registry imports this module for every command

        label = np.asarray(self.cases[case_index].label[0])
        found = {}
        for cls in (int(c) for c in np.unique(label) if c > 0):
            boxes = [b for b in scipy.ndimage.find_objects(scipy.ndimage.label(label == cls)[0]) if b is not None]
            boxes.sort(key=lambda b: np.prod([s.stop - s.start for s in b]))
            if boxes:
                found[cls] = boxes[-2:]
        return found

    def _around(self, box: tuple[slice, ...], shape: tuple[int, ...], rng: np.random.Generator) -> list[int]:
        """A patch corner covering the object box (or inside it, when the object is larger),
        placed at random, clamped to the volume: the reference's `adjust`."""
        corner = []
        for s, p, n in zip(box, self.patch, shape):
            diff = p - (s.stop - s.start)
            low = s.start - int(rng.integers(diff + 1)) if diff >= 0 else s.start + int(rng.integers(-diff + 1))
            corner.append(min(max(low, 0), n - p))
        return corner


@cache
def _permutation(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng([seed, 0, epoch]).permutation(n)
