"""Tiny data folders in the official Criteo multi-hot format, written by the tests themselves."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.workloads.dlrm_dcnv2.data.criteo import write_day


def write_days(folder: Path, days: int, rows: int | list[int], multi_hot: tuple[int, ...], seed: int = 0,
               id_range: int = 100_000) -> Path:
    """`days` days of random samples (the last is the eval day); ids may exceed a table's rows,
    as the official files' do before hashing."""
    rng = np.random.default_rng(seed)
    counts = rows if isinstance(rows, list) else [rows] * days
    folder.mkdir(parents=True, exist_ok=True)
    for day, n in enumerate(counts):
        dense = np.log1p(rng.integers(0, 50, (n, 13))).astype(np.float32)
        labels = (rng.random(n) < 0.3).astype(np.int32)
        sparse = [rng.integers(0, id_range, (n, m)).astype(np.int32) for m in multi_hot]
        write_day(folder, day, dense, labels, sparse)
    return folder
