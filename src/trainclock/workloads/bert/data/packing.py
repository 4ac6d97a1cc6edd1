"""Sequences packed into rows of max_seq_length, in the model's packed layout (model.py, hdf5.py:
input_mask holds each token's sequence index 1..K in its row and 0 for padding, positions restart
at 0 for each sequence, masked_lm_* have max_predictions + K slots a row, next_sentence_* are
[rows, K]), so a batch computes its real tokens instead of one mostly padded row a sequence.

The sequences are given: packing only lays them out (first-fit-decreasing by length), so the
model sees exactly the sequences of the unpacked batch, and its loss (a mean over sequences) is the
same. The row count is padded up to one of a few buckets, so a run meets few shapes (a compiled
model recompiles per shape); a padded row has no tokens, predictions or sequences, so it adds
nothing to the loss, the gradients or the masked-LM counts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from trainclock.errors import UsageError

SEQUENCES_PER_ROW = 3  # NVIDIA's packs: more rarely fit 512 tokens, and each adds a [CLS] slot to every row
ROW_BUCKETS = 8  # row counts a micro-batch of n sequences is padded to: multiples of ceil(n / 8), at most n
TOKEN_FIELDS = ("input_ids", "segment_ids")
PREDICTION_FIELDS = ("masked_lm_ids", "masked_lm_weights")


@dataclass(frozen=True)
class Placement:
    """Where one sequence goes: its row, first token, index in the row (0-based) and first prediction slot."""

    row: int
    start: int
    slot: int
    first_prediction: int


def first_fit_decreasing(lengths: list[int], predictions: list[int], seq_len: int, per_row: int,
                         prediction_slots: int) -> tuple[list[Placement], int]:
    """Each sequence's placement (in the input order) and the number of rows: longest first, each
    into the first row with room for its tokens, its predictions and one more sequence."""
    used: list[int] = []
    count: list[int] = []
    predicted: list[int] = []
    placed: dict[int, Placement] = {}
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        n, p = lengths[i], predictions[i]
        row = next((r for r in range(len(used)) if used[r] + n <= seq_len and count[r] < per_row
                    and predicted[r] + p <= prediction_slots), len(used))
        if row == len(used):
            for column in (used, count, predicted):
                column.append(0)
        placed[i] = Placement(row, used[row], count[row], predicted[row])
        used[row] += n
        count[row] += 1
        predicted[row] += p
    return [placed[i] for i in range(len(lengths))], len(used)


def bucket_rows(needed: int, sequences: int) -> int:
    """The padded row count of a micro-batch that needs `needed` rows for `sequences` sequences."""
    granule = math.ceil(sequences / ROW_BUCKETS)
    return min(sequences, math.ceil(needed / granule) * granule)


def sequence_lengths(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Tokens each unpacked row spans: up to its last real token, or its last prediction if later
    (one on padding is kept where the unpacked row has it, so both layouts gather the same token)."""
    real = batch["input_mask"] != 0
    width = real.size(1)
    last_token = torch.where(real.any(1), width - real.flip(1).int().argmax(1), 0)
    used = batch["masked_lm_weights"] != 0
    last_prediction = torch.where(used, batch["masked_lm_positions"].long() + 1, 0).amax(1) \
        if used.size(1) else torch.zeros_like(last_token)
    return torch.maximum(torch.maximum(last_token, last_prediction), torch.ones_like(last_token))  # [CLS] at 0


def pack(batch: dict[str, torch.Tensor], seq_len: int, max_predictions: int,
         per_row: int = SEQUENCES_PER_ROW, rows: int | None = None) -> dict[str, torch.Tensor]:
    """Unpacked rows (as_tensors' fields, one sequence a row) packed into rows of `seq_len` tokens,
    at most `per_row` sequences and max_predictions + per_row predictions a row; `rows` pads the row
    count (default: bucket_rows). Refuses, in one line, a sequence that cannot fit a row."""
    n = len(batch["input_ids"])
    slots = max_predictions + per_row
    lengths = sequence_lengths(batch)
    used = batch["masked_lm_weights"] != 0
    predictions = used.sum(1)
    for name, values, limit, what in ((f"max_seq_length {seq_len}", lengths, seq_len, "tokens"),
                                      (f"the {slots} prediction slots of a packed row", predictions, slots,
                                       "masked positions")):
        over = torch.nonzero(values > limit)
        if len(over):
            i = int(over[0])
            raise UsageError(f"sequence {i} of the batch holds {int(values[i])} {what}, more than {name}; "
                             f"prepare the data for this length, or train unpacked (--no-pack-sequences)")
    placements, needed = first_fit_decreasing(lengths.tolist(), predictions.tolist(), seq_len, per_row, slots)
    rows = bucket_rows(needed, n) if rows is None else rows
    if rows < needed:
        raise ValueError(f"{n} sequences need {needed} packed rows, not {rows}")
    row_N = torch.tensor([p.row for p in placements], dtype=torch.long)
    start_N = torch.tensor([p.start for p in placements], dtype=torch.long)
    slot_N = torch.tensor([p.slot for p in placements], dtype=torch.long)
    first_N = torch.tensor([p.first_prediction for p in placements], dtype=torch.long)

    width = batch["input_ids"].size(1)
    offset_NT = torch.arange(width).unsqueeze(0)
    inside_NT = offset_NT < lengths.unsqueeze(1)
    at = (row_N.unsqueeze(1) * seq_len + start_N.unsqueeze(1) + offset_NT)[inside_NT]  # flat index into [rows, seq_len]
    out = {}
    for name in TOKEN_FIELDS:
        out[name] = _scatter(batch[name], inside_NT, at, (rows, seq_len))
    sequence_NT = (batch["input_mask"] != 0).long() * (slot_N.unsqueeze(1) + 1)  # a hole inside a row stays padding
    out["input_mask"] = _scatter(sequence_NT.to(batch["input_mask"].dtype), inside_NT, at, (rows, seq_len))
    out["positions"] = _scatter(offset_NT.expand(n, -1), inside_NT, at, (rows, seq_len))

    # the k-th used prediction of a sequence goes to slot first_prediction + k of its row
    rank_NP = used.long().cumsum(1) - 1
    to = (row_N.unsqueeze(1) * slots + first_N.unsqueeze(1) + rank_NP)[used]
    moved = batch["masked_lm_positions"] + start_N.unsqueeze(1).to(batch["masked_lm_positions"].dtype)
    out["masked_lm_positions"] = _scatter(moved, used, to, (rows, slots))
    for name in PREDICTION_FIELDS:
        out[name] = _scatter(batch[name], used, to, (rows, slots))

    cls, every = row_N * per_row + slot_N, torch.ones(n, dtype=torch.bool)
    out["next_sentence_positions"] = _scatter(start_N, every, cls, (rows, per_row))
    out["next_sentence_labels"] = _scatter(batch["next_sentence_labels"].reshape(n), every, cls, (rows, per_row))
    out["next_sentence_weights"] = _scatter(torch.ones(n, dtype=batch["masked_lm_weights"].dtype), every, cls,
                                            (rows, per_row))
    return out


def _scatter(source: torch.Tensor, keep: torch.Tensor, at: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """A zero tensor of `shape` (source's dtype) with source[keep] written at the flat indices `at`."""
    out = torch.zeros(shape[0] * shape[1], dtype=source.dtype)
    out[at] = source[keep]
    return out.view(shape)
