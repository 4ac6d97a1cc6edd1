"""Made-up Criteo multi-hot day files (criteo.write_day's official layout) with random values: the
tests' tiny folders and a member's sample data (Workload.write_sample_data), which measures the
host pipeline at full size without the 1TB set. Random clicks: no target is reachable on them.

One sample of the full size on disk: 13 float32 dense + one int32 label + 214 int32 ids (the
closed rules' multi-hot sizes summed) = 912 bytes, as in the official preprocessed files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trainclock.workloads.dlrm_dcnv2.data.criteo import write_day
from trainclock.workloads.dlrm_dcnv2.spec import DENSE_FEATURES, DlrmSpec

CLICK_RATE = 0.3
# the eval day's rows: its first half (the validation set) is 2 rows, one click and one not, the
# fewest for which AUC, the score, is defined
EVAL_DAY_ROWS = 4


def random_day(rng: np.random.Generator, rows: int, multi_hot: Sequence[int],
               id_ranges: Sequence[int]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(dense, labels, sparse bags) of `rows` random samples: dense counts log-transformed as the
    Criteo preprocessing stores them, ids uniform in [0, id_range) per table (a range above a
    table's rows gives ids the reader must hash, as the official files' are)."""
    dense = np.log1p(rng.integers(0, 50, (rows, DENSE_FEATURES))).astype(np.float32)
    labels = (rng.random(rows) < CLICK_RATE).astype(np.int32)
    sparse = [rng.integers(0, high, (rows, bag)).astype(np.int32) for bag, high in zip(multi_hot, id_ranges)]
    return dense, labels, sparse


def write_days(folder: Path, counts: Sequence[int], multi_hot: Sequence[int], seed: int = 0,
               id_ranges: int | Sequence[int] = 100_000) -> Path:
    """Day files day_0 .. day_{len(counts)-1} of counts[d] random samples each (the last is the
    eval day); one id range for every table, or one per table."""
    ranges = [id_ranges] * len(multi_hot) if isinstance(id_ranges, int) else list(id_ranges)
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for day, n in enumerate(counts):
        write_day(folder, day, *random_day(rng, n, multi_hot, ranges))
    return folder


def write_sample(spec: DlrmSpec, folder: Path, samples: int, seed: int) -> str:
    """The member's day files with `samples` training samples and the smallest validation set;
    the --data value that runs the member on them. A job needs at least one global batch of
    training samples (pass samples >= the run's --gbs)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    # every training sample in day 0, days 1 .. train_days-1 empty (the reader needs their files):
    # a real day holds ~180M samples, so a global batch is one contiguous block of one day, read
    # as one slice per table; spread over 23 small days it would be 23 slices, a cost the real
    # data never has
    for day in range(spec.train_days):
        write_day(folder, day, *random_day(rng, samples if day == 0 else 0, spec.shape.multi_hot, spec.shape.rows))
    dense, labels, sparse = random_day(rng, EVAL_DAY_ROWS, spec.shape.multi_hot, spec.shape.rows)
    labels[:2] = (0, 1)
    write_day(folder, spec.train_days, dense, labels, sparse)
    return str(folder)
