"""Made-up BERT data in a member's own on-disk format, to time the host pipeline and feed tests
without the real set (its contents are random: no target is reachable on it).

bert-large: NVIDIA's HDF5 shards of the MLPerf Wikipedia set (packed by default, as NVIDIA's
submissions read them, several sequences a 512-token row; unpacked on request) under packed_data/
(or hdf5_varlength/), and a one-sequence eval shard (unpacked) under eval_varlength/; no start
checkpoint: the meta device, which host measurements build on, loads none.

Sequences are 512 slots with the real set's spread of lengths: at 512 more than half of the
Wikipedia set's tokens are padding (Krell et al. 2021, the reason NVIDIA packs), so a few
sequences fill all 512 and the rest are spread below, about 240 tokens on average.
Each is a sentence pair as the reference's create_pretraining_data makes it ([CLS] A [SEP] B [SEP],
15% of its tokens predicted, at most 76, 80% of them [MASK]), with bert-large-uncased's special ids.

CPU tiers: a folder of made-up English-like text, the tiers' --data format.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from trainclock.workloads.bert.data import hdf5
from trainclock.workloads.bert.spec import BertSpec

PAD, CLS, SEP, MASK = 0, 101, 102, 103  # bert-large-uncased's vocab.txt
FIRST_PIECE = 999  # ids below are [unused] slots and specials, never in the text
FULL_SHARE = 0.12  # sequences whose document fills all 512 slots
MIN_TOKENS = 8
MASKED_LM_PROB = 0.15
SHARD_SEQUENCES = 32_768
EVAL_SEQUENCES = 1  # the smallest eval set build_job accepts (ranks without a row join weighted 0)


def write_sample(spec: BertSpec, folder: Path, samples: int, seed: int, packed: bool = True) -> str:
    """At least `samples` training sequences and the smallest eval set under `folder`; the --data value."""
    folder = Path(folder)
    if spec.corpus != "wikipedia":
        return write_text(folder, seed)
    rng = np.random.default_rng(seed)
    train = instances(max(samples, 1), spec.seq_len, spec.max_predictions, spec.shape.vocab_size, rng)
    shards = math.ceil(len(train["input_ids"]) / SHARD_SEQUENCES)
    for i, rows in enumerate(np.array_split(np.arange(len(train["input_ids"])), shards)):
        part = {k: v[rows] for k, v in train.items()}
        if packed:
            hdf5.write_packed(folder / "packed_data" / f"part_{i:05d}.hdf5", hdf5.pack(part, spec.max_predictions))
        else:
            hdf5.write_instances(folder / "hdf5_varlength" / f"part_{i:05d}.hdf5", part)
    evaluation = instances(EVAL_SEQUENCES, spec.seq_len, spec.max_predictions, spec.shape.vocab_size, rng)
    hdf5.write_instances(folder / "eval_varlength" / "part_00000.hdf5", evaluation)  # NVIDIA's eval is unpacked
    return str(folder)


def lengths(n: int, seq_len: int, rng: np.random.Generator) -> np.ndarray:
    """Tokens per sequence, specials included: FULL_SHARE at seq_len, the rest skewed short."""
    spread = MIN_TOKENS + rng.beta(1.3, 2.2, size=n) * (seq_len - MIN_TOKENS)
    return np.where(rng.random(n) < FULL_SHARE, seq_len, spread.astype(np.int64))


def instances(n: int, seq_len: int, max_predictions: int, vocab_size: int,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
    """`n` random sentence-pair instances in the unpacked arrays (make_instances' fields), vectorised."""
    length = lengths(n, seq_len, rng)
    a_end = 1 + (rng.random(n) * (length - 4)).astype(np.int64)  # [CLS] A is 1..a_end, its [SEP] at a_end + 1
    slot = np.arange(seq_len)[None, :]
    real = slot < length[:, None]
    ids = np.where(real, rng.integers(FIRST_PIECE, vocab_size, size=(n, seq_len)), PAD)
    ids[:, 0] = CLS
    sep = (slot == a_end[:, None] + 1) | (slot == length[:, None] - 1)
    ids[sep] = SEP
    # the reference predicts round(15%) of the tokens, at least 1, at most max_predictions, never a special
    count = np.minimum(max_predictions, np.maximum(1, np.rint(length * MASKED_LM_PROB).astype(np.int64)))
    keys = np.where(real & ~sep & (slot > 0), rng.random((n, seq_len)), 2.0)
    chosen = np.argsort(keys, axis=1)[:, :max_predictions]
    used = np.arange(max_predictions)[None, :] < count[:, None]
    positions = np.sort(np.where(used, chosen, seq_len), axis=1)  # in order, as the reference writes them
    positions = np.where(used, positions, 0)  # position 0 ([CLS]) marks an unused slot
    rows = np.arange(n)[:, None]
    originals = np.where(used, ids[rows, positions], 0)
    draw = rng.random((n, max_predictions))
    replaced = np.where(draw < 0.8, MASK, np.where(draw < 0.9, rng.integers(FIRST_PIECE, vocab_size, size=draw.shape),
                                                   originals))
    row, k = np.nonzero(used)
    ids[row, positions[row, k]] = replaced[row, k]
    return {
        "input_ids": ids.astype(np.int32),
        "input_mask": real.astype(np.int8),
        "segment_ids": (real & (slot > a_end[:, None] + 1)).astype(np.int8),
        "masked_lm_positions": positions.astype(np.int32),
        "masked_lm_ids": originals.astype(np.int32),
        "masked_lm_weights": used.astype(np.float32),
        "next_sentence_labels": (rng.random(n) < 0.5).astype(np.int8),
    }


LINES = 8_000  # 40 documents of 200 lines: every 20th is held out, so 2 eval documents
WORDS_PER_LINE = 12


def write_text(folder: Path, seed: int) -> str:
    """A CPU tier's data: one .txt of made-up sentences (Zipf-distributed made-up words), in a folder."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    lexicon = ["".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(5_000)]
    weights = 1.0 / np.arange(1, len(lexicon) + 1)
    words = np.array(lexicon)[rng.choice(len(lexicon), size=(LINES, WORDS_PER_LINE), p=weights / weights.sum())]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "made-up.txt").write_text("".join(" ".join(line).capitalize() + ".\n" for line in words))
    return str(folder)
