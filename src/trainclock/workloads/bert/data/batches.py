"""Deterministic batches: the global batch of step s depends only on (seed, s), so the samples are
the same whatever the micro-batch size or the number of processes; packed, the same sequences in
the same micro-batches, laid out several a row (packing.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import accumulate

import numpy as np
import torch

from trainclock.workload.batches import TreeBatch
from trainclock.workloads.bert.data.packing import pack

FIELDS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
          "masked_lm_weights", "next_sentence_labels")
# packed rows (several sequences a row) also carry each token's position in its sequence and each
# sequence's [CLS] position and presence; next_sentence_labels is then [rows, sequences a row]
PACKED_FIELDS = ("positions", "next_sentence_positions", "next_sentence_weights")
WEIGHTS = ("masked_lm_weights", "next_sentence_weights")


def as_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The model's inputs as tensors (indices as int64, as embeddings and gathers take them), with
    the packed fields where the arrays are packed rows."""
    out = {}
    for name in FIELDS + tuple(f for f in PACKED_FIELDS if f in arrays):
        out[name] = torch.from_numpy(arrays[name].astype(np.float32 if name in WEIGHTS else np.int64))
    return out


def train_batch(train: dict[str, torch.Tensor], seed: int, step: int, batch: int,
                rows: slice = slice(None)) -> dict[str, torch.Tensor]:
    """Rows `rows` of step `step`'s global batch of `batch` sequences: the whole batch's indices are
    drawn (cheap) so a rank's rows do not depend on the number of ranks; only its own are gathered."""
    n = len(train["input_ids"])
    index = torch.from_numpy(np.random.default_rng([seed, step]).choice(n, size=batch, replace=batch > n)[rows])
    return {k: v[index] for k, v in train.items()}


def rows(data: dict[str, torch.Tensor], index: list[int]) -> dict[str, torch.Tensor]:
    return {k: v[index] for k, v in data.items()}


@dataclass(frozen=True)
class PackedStep:
    """A rank's rows of a step's global batch as packed micro-batches (packing.pack): micro-batch i
    holds exactly counts[i] of the step's sequences, the unpacked path's micro-batch i, laid out in
    packed rows. MLPerf counts bert's batch and progress in sequences, so they stay the unit here."""

    micro: tuple[dict[str, torch.Tensor], ...]
    counts: tuple[int, ...]

    def inputs(self) -> dict[str, torch.Tensor]:
        """The model's keyword inputs: one micro-batch's rows, or several's stacked (every packed
        micro-batch has the same widths; the model's loss is then the mean over all their sequences)."""
        if len(self.micro) == 1:
            return self.micro[0]
        return {k: torch.cat([m[k] for m in self.micro]) for k in self.micro[0]}


def model_inputs(batch: dict[str, torch.Tensor] | PackedStep) -> dict[str, torch.Tensor]:
    return batch.inputs() if isinstance(batch, PackedStep) else batch


def packed_train_batch(train: dict[str, torch.Tensor], seed: int, step: int, batch: int, rows: slice,
                       micro: int, seq_len: int, max_predictions: int) -> PackedStep:
    """train_batch's rows of step `step`, cut into micro-batches of `micro` sequences as the loop
    cuts them, each packed: the same sequences in the same micro-batches, in fewer rows."""
    mine = train_batch(train, seed, step, batch, rows)
    n = len(mine["input_ids"])
    per = max(1, min(micro, n))
    cuts = [(i, min(i + per, n)) for i in range(0, n, per)]
    return PackedStep(tuple(pack({k: v[a:b] for k, v in mine.items()}, seq_len, max_predictions) for a, b in cuts),
                      tuple(b - a for a, b in cuts))


def packed_rows_per_sequence(train: dict[str, torch.Tensor], seed: int, batch: int, micro: int, seq_len: int,
                             max_predictions: int, steps: int = 4) -> float:
    """The rows a packed run computes per sequence (bucket padding included), over its first steps'
    whole batches: a sequence then costs this share of a row's FLOPs, not a whole row's."""
    rows = sequences = 0
    for step in range(steps):
        packed = packed_train_batch(train, seed, step, batch, slice(0, batch), micro, seq_len, max_predictions)
        rows += sum(len(m["input_ids"]) for m in packed.micro)
        sequences += sum(packed.counts)
    return rows / sequences


class PackedBatches(TreeBatch):
    """The loop's handling of PackedStep batches, whose rows are counted in sequences: a slice or a
    micro-batch is whole packed micro-batches (the loop cuts at the sizes packed_train_batch packed)."""

    def size(self, batch: PackedStep) -> int:
        return sum(batch.counts)

    def rows(self, batch: PackedStep, rows: slice) -> PackedStep:
        bounds = [0, *accumulate(batch.counts)]
        start, stop, _ = rows.indices(bounds[-1])
        if start not in bounds or stop not in bounds:
            raise ValueError(f"sequences {start}:{stop} cut a packed micro-batch (they end at {bounds[1:]})")
        first, last = bounds.index(start), bounds.index(stop)
        return PackedStep(batch.micro[first:last], batch.counts[first:last])

    def to(self, batch: PackedStep | dict, device: torch.device) -> PackedStep | dict:
        if isinstance(batch, PackedStep):
            return replace(batch, micro=tuple(self.to(m, device) for m in batch.micro))
        return super().to(batch, device)  # a micro-batch's dict: TreeBatch recurses through self

    def pin_memory(self, batch: PackedStep | dict) -> PackedStep | dict:
        if isinstance(batch, PackedStep):
            return replace(batch, micro=tuple(self.pin_memory(m) for m in batch.micro))
        return super().pin_memory(batch)
