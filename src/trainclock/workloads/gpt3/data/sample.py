"""Made-up GPT-3 data in a member's own on-disk format, to time the host pipeline and feed tests
without the real set (its contents are random: no target is reachable on it).

C4 members (gpt3-175b and the paper sizes): C4's published json.gz shards, c4-train.00000-of-01024
and c4-validation.00000-of-00008, whose documents have C4's spread of lengths (about 470 words on
average, lognormal: MLPerf's validation subset is 11.6M tokens in 24,567 documents). The words are
made up and Zipf-distributed over a lexicon rich enough that trainclock's byte-level BPE learns its
full 50,257-token vocabulary from the train shard. The validation shard holds as many words as
the 5,659 sequences of 2,048 tokens the job evaluates on need tokens (MLPerf's subset; fewer are
refused), and every word is a token or more. The full config tokenizes all of it when it builds the
job (untimed, cached): about 20-40 s on two busy cores, most of it the validation shard.

CPU tiers: a text file of made-up words, the tiers' --data format.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainclock.workloads.gpt3.data.sources import PIECE_CHARS, VAL_EVERY, write_c4_shard
from trainclock.workloads.gpt3.spec import GPT3Spec

LEXICON_WORDS = 40_000
TOKENIZER_WORDS = 500_000  # train text below this leaves the BPE short of a 50,257-token vocabulary
DOCUMENT_WORDS = (5.65, 1.0)  # lognormal (mu, sigma) of C4's words per document: mean 470, median 285
MIN_DOCUMENT_WORDS = 20
GZIP_LEVEL = 1  # made-up text compresses no better at 6, only slower; readers do not care


class Words:
    """Made-up words of English's lengths (mean ~5 letters), drawn by a Zipf law over a fixed lexicon."""

    def __init__(self, rng: np.random.Generator, size: int = LEXICON_WORDS):
        letters = np.frombuffer(b"etaoinshrdlcumwfgypbvkjxqz", dtype=np.uint8)
        skew = 1.0 / np.arange(1, 27) ** 0.8  # common letters first, as in English
        lengths = 1 + np.minimum(rng.poisson(4.0, size), 11)
        text = rng.choice(letters, size=int(lengths.sum()), p=skew / skew.sum()).tobytes().decode()
        ends = np.cumsum(lengths)
        self.lexicon = np.array([text[e - n:e] for e, n in zip(ends.tolist(), lengths.tolist())], dtype=object)
        frequency = 1.0 / (np.arange(size) + 2.7)  # Zipf-Mandelbrot, as word ranks in English text
        self.cdf = np.cumsum(frequency) / frequency.sum()
        self.rng = rng

    def draw(self, words: int) -> np.ndarray:
        return self.lexicon[np.minimum(np.searchsorted(self.cdf, self.rng.random(words)), len(self.cdf) - 1)]

    def documents(self, words: int) -> list[str]:
        """Documents of C4's lengths holding `words` words in all (every word is at least one token)."""
        drawn = self.draw(words)
        mu, sigma = DOCUMENT_WORDS
        sizes = np.maximum(MIN_DOCUMENT_WORDS, self.rng.lognormal(mu, sigma, size=words // MIN_DOCUMENT_WORDS + 1))
        ends = np.minimum(np.cumsum(sizes.astype(np.int64)), words)
        ends = ends[: int(np.searchsorted(ends, words)) + 1]
        starts = np.concatenate([[0], ends[:-1]])
        return [" ".join(drawn[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]

    def paragraph(self, chars: int) -> str:
        """One line of at least `chars` characters."""
        text = " ".join(self.draw(chars // 4))
        while len(text) < chars:
            text += " " + " ".join(self.draw(chars // 16 + 1))
        return text


def write_sample(spec: GPT3Spec, folder: Path, samples: int, seed: int) -> str:
    """At least `samples` training sequences and the smallest validation set under `folder`; the --data value."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    words = Words(np.random.default_rng(seed))
    train = max(samples, 1) * (spec.seq_len + 1)  # disjoint windows of seq_len + 1 tokens
    validation = spec.eval_sequences * spec.seq_len + 1  # what the validation set's non-overlapping windows need
    if spec.corpus != "c4":
        return write_text(folder, words, train, validation)
    write_c4_shard(folder / "c4-train.00000-of-01024.json.gz", words.documents(max(train, TOKENIZER_WORDS)),
                   compresslevel=GZIP_LEVEL)
    write_c4_shard(folder / "c4-validation.00000-of-00008.json.gz", words.documents(validation),
                   compresslevel=GZIP_LEVEL)
    return f"c4:{folder}"


def write_text(folder: Path, words: Words, train: int, validation: int) -> str:
    """One text file of lines of at least a piece's length, so that each line is one piece of the text
    source and every VAL_EVERY-th goes to validation: lines are added until both splits have enough words."""
    lines, have = [], {"train": 0, "val": 0}
    while have["train"] < train or have["val"] < validation:
        line = words.paragraph(PIECE_CHARS)
        have["val" if len(lines) % VAL_EVERY == VAL_EVERY - 1 else "train"] += line.count(" ") + 1
        lines.append(line)
    (folder / "made-up.txt").write_text("".join(line + "\n" for line in lines))
    return str(folder)
