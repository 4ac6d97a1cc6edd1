"""Tiny data folders in the official Criteo multi-hot format, written by the tests through the
package's own writer (data/sample.py)."""

from __future__ import annotations

from pathlib import Path

from trainclock.workloads.dlrm_dcnv2.data.sample import write_days as write_day_files


def write_days(folder: Path, days: int, rows: int | list[int], multi_hot: tuple[int, ...], seed: int = 0,
               id_range: int = 100_000) -> Path:
    """`days` days of random samples (the last is the eval day); ids may exceed a table's rows,
    as the official files' do before hashing."""
    counts = rows if isinstance(rows, list) else [rows] * days
    return write_day_files(folder, counts, multi_hot, seed=seed, id_ranges=id_range)
