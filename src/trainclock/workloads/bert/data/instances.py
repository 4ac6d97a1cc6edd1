"""Sentence-pair instances with static masking, as the reference's create_pretraining_data.py
makes them: segments A and B filled up to the target length from whole sentences, B the real
continuation or (50%) a random document's text, 15% of the tokens predicted (80% [MASK], 10% a
random token, 10% unchanged), at most `max_predictions` per sequence. Arrays, not objects: the
same fields as the reference's TFRecords (input_ids, input_mask, segment_ids, masked_lm_*,
next_sentence_labels)."""

from __future__ import annotations

import random

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(5)
SHORT_SEQ_PROB = 0.1
MASKED_LM_PROB = 0.15


def make_instances(documents: list[list[list[int]]], count: int, seq_len: int, max_predictions: int,
                   vocab_size: int, seed: int) -> dict[str, np.ndarray]:
    """`count` instances drawn in passes over the documents (each pass masks anew), from `seed`."""
    rng = random.Random(seed)
    out = _empty(count, seq_len, max_predictions)
    n = 0
    while n < count:
        before = n
        for d in range(len(documents)):
            for tokens_a, tokens_b, is_random in _pairs(documents, d, seq_len - 3, rng):
                _fill(out, n, tokens_a, tokens_b, is_random, max_predictions, vocab_size, rng)
                n += 1
                if n == count:
                    return out
        if n == before:
            raise ValueError("the documents give no instance; give more text")
    return out


def _empty(count: int, seq_len: int, max_predictions: int) -> dict[str, np.ndarray]:
    return {
        "input_ids": np.zeros((count, seq_len), np.int32),
        "input_mask": np.zeros((count, seq_len), np.int8),
        "segment_ids": np.zeros((count, seq_len), np.int8),
        "masked_lm_positions": np.zeros((count, max_predictions), np.int32),
        "masked_lm_ids": np.zeros((count, max_predictions), np.int32),
        "masked_lm_weights": np.zeros((count, max_predictions), np.float32),
        "next_sentence_labels": np.zeros((count,), np.int8),
    }


def _pairs(documents, d: int, max_tokens: int, rng: random.Random):
    document = documents[d]
    target = rng.randint(2, max_tokens) if rng.random() < SHORT_SEQ_PROB else max_tokens
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for s in chunk[:a_end] for t in s]
                is_random = len(chunk) == 1 or (len(documents) > 1 and rng.random() < 0.5)
                if is_random:
                    other = rng.randrange(len(documents) - 1) if len(documents) > 1 else 0
                    other += other >= d and len(documents) > 1
                    start = rng.randrange(len(documents[other]))
                    tokens_b = [t for s in documents[other][start:] for t in s][: max(1, target - len(tokens_a))]
                    i -= len(chunk) - a_end  # the unused sentences start the next pair, as the reference does
                else:
                    tokens_b = [t for s in chunk[a_end:] for t in s]
                _truncate(tokens_a, tokens_b, max_tokens, rng)
                if tokens_a and tokens_b:
                    yield tokens_a, tokens_b, is_random
            chunk, length = [], 0
            target = rng.randint(2, max_tokens) if rng.random() < SHORT_SEQ_PROB else max_tokens
        i += 1


def _truncate(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        del longer[0 if rng.random() < 0.5 else -1]


def _fill(out, n: int, a: list[int], b: list[int], is_random: bool, max_predictions: int, vocab_size: int,
          rng: random.Random) -> None:
    tokens = [CLS, *a, SEP, *b, SEP]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    candidates = [i for i, t in enumerate(tokens) if t not in (CLS, SEP)]
    rng.shuffle(candidates)
    chosen = sorted(candidates[: min(max_predictions, max(1, round(len(tokens) * MASKED_LM_PROB)))])
    labels = [tokens[i] for i in chosen]
    for i in chosen:
        r = rng.random()
        if r < 0.8:
            tokens[i] = MASK
        elif r < 0.9:
            tokens[i] = rng.randrange(len(SPECIALS), vocab_size)
    out["input_ids"][n, : len(tokens)] = tokens
    out["input_mask"][n, : len(tokens)] = 1
    out["segment_ids"][n, : len(segments)] = segments
    out["masked_lm_positions"][n, : len(chosen)] = chosen
    out["masked_lm_ids"][n, : len(labels)] = labels
    out["masked_lm_weights"][n, : len(chosen)] = 1.0
    out["next_sentence_labels"][n] = int(is_random)
