"""The official data: MLCommons' preprocessed SCROLLS GovReport (scrolls_gov_report_8k), two parquet
files with one tokenized 8192-token sample per row: input_ids, attention_mask and labels, labels
-100 wherever the loss skips (the document and the padding). The reference reads them with
datasets.load_dataset("parquet", ...) and lets the model shift labels by one; here the shift is
made once on load, so a sample is (inputs, next-token labels) like the CPU tiers'."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from trainclock.errors import DataError, UsageError
from trainclock.workloads.llama2_70b_lora.data.task import TaskSplit
from trainclock.workloads.llama2_70b_lora.model import IGNORE

FILES = {"train": "train-00000-of-00001.parquet", "val": "validation-00000-of-00001.parquet"}


def read_split(folder: str | Path, split: str, seq_len: int) -> TaskSplit:
    """One split as (inputs, labels) tensors of shape (rows, seq_len), int32 to halve the memory."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UsageError(f"no GovReport data at {folder}: pass --data with the scrolls_gov_report_8k folder "
                         f"({FILES['train']}, {FILES['val']})")
    path = folder / FILES[split]
    try:
        table = pq.read_table(path, columns=["input_ids", "labels"])
    except (OSError, pa.ArrowInvalid, KeyError) as e:
        raise DataError(f"cannot read {path} ({e}); it must be the MLCommons GovReport parquet with "
                        "input_ids and labels columns") from None
    ids = _rows(table.column("input_ids").to_pylist(), path, seq_len)
    labels = _rows(table.column("labels").to_pylist(), path, seq_len)
    # the label of position t is the token at t + 1; the last position has none
    shifted = np.concatenate([labels[:, 1:], np.full((len(labels), 1), IGNORE, dtype=np.int32)], axis=1)
    return TaskSplit(torch.from_numpy(ids), torch.from_numpy(shifted))


def _rows(values: list, path: Path, seq_len: int) -> np.ndarray:
    if not values:
        raise DataError(f"{path} holds no samples")
    bad = next((i for i, row in enumerate(values) if row is None or len(row) != seq_len), None)
    if bad is not None:
        length = None if values[bad] is None else len(values[bad])
        raise DataError(f"{path}: row {bad} has {length} tokens, not the benchmark's {seq_len}; use the 8k-token files")
    return np.asarray(values, dtype=np.int32)


def write_split(folder: Path, split: str, inputs: np.ndarray, labels: np.ndarray) -> Path:
    """Samples in the official layout (unshifted labels, attention_mask of ones): tests and sample data."""
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"input_ids": inputs.tolist(), "attention_mask": np.ones_like(inputs).tolist(),
                      "labels": labels.tolist()})
    pq.write_table(table, folder / FILES[split])
    return folder / FILES[split]
