"""Made-up photographs for workloads' sample data (write_sample_data): smooth noise with a natural
image's 1/f amplitude spectrum, so JPEG files come out at a real set's size at the same quality
(white noise would compress far worse, flat colour far better)."""

from __future__ import annotations

import numpy as np


def textures(rng: np.random.Generator, count: int, side: int, slope: float, channels: int = 3) -> list[np.ndarray]:
    """`count` side x side images (H x W x 3 uint8, or H x W for one channel) of smooth noise whose
    amplitude spectrum falls as 1/f^slope, the channels correlated as a photograph's are (mostly
    shared brightness, some colour)."""
    fy, fx = np.fft.fftfreq(side)[:, None], np.fft.rfftfreq(side)[None, :]
    f = np.hypot(fx, fy)
    f[0, 0] = 1.0
    amplitude = f ** -slope
    amplitude[0, 0] = 0.0  # no DC term: the brightness is set below
    out = []
    for _ in range(count):
        planes = [np.fft.irfft2(amplitude * (rng.normal(size=f.shape) + 1j * rng.normal(size=f.shape)), s=(side, side))
                  for _ in range(channels)]
        x = np.stack(planes, -1)
        x = 0.7 * x.mean(-1, keepdims=True) + 0.3 * x
        x = (x - x.mean()) / x.std()
        image = np.clip(118 + 52 * x, 0, 255).astype(np.uint8)
        out.append(image if channels == 3 else image[..., 0])
    return out


def cut(rng: np.random.Generator, bases: list[np.ndarray], size: tuple[int, int]) -> np.ndarray:
    """A width x height crop of a random base at a random place, flipped at random: many distinct
    pictures from a few textures, each costing only its JPEG encoding."""
    base = bases[int(rng.integers(len(bases)))]
    width, height = size
    top, left = int(rng.integers(base.shape[0] - height + 1)), int(rng.integers(base.shape[1] - width + 1))
    crop = base[top:top + height, left:left + width]
    return np.ascontiguousarray(crop[:, ::-1] if rng.random() < 0.5 else crop)
