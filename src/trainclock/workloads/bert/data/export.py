"""Turn your own text into bert-large's data formats: the reference's TFRecords or NVIDIA's HDF5
shards (unpacked), with a WordPiece vocabulary learned on it, sentence pairs for next-sentence
prediction and 15% masking, all from a fixed seed (the tiers' generator, at the full shape).

  python -m trainclock.workloads.bert.data.export TEXT OUT [--format tfrecord|hdf5] [--shards N]
      [--train-instances N] [--eval-instances N] [--seq-len 512] [--max-predictions 76] [--vocab-size 30522]

TEXT is a .txt file or a folder of them (documents are blocks of lines; every 20th is held out for
eval). OUT gets part-0000i-of-0000N shards, eval_10k/part-00000 and the vocabulary (tokenizer.json,
vocab.txt); `trainclock run bert --data OUT` reads it back.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from trainclock.errors import TrainclockError
from trainclock.storage import atomic_write_text
from trainclock.workloads.bert.data import hdf5, tfrecord
from trainclock.workloads.bert.data.prepare import Layout, tokenize
from trainclock.workloads.bert.data.text import parse_source

WRITERS = {"tfrecord": (tfrecord.write_instances, ""), "hdf5": (hdf5.write_instances, ".hdf5")}


def export(text: str, out: Path, layout: Layout, data_format: str = "tfrecord", shards: int = 1) -> list[Path]:
    """Write the shards, the eval file and the vocabulary; returns the data files written."""
    if shards < 1 or shards > layout.train_instances:
        raise ValueError(f"--shards must be between 1 and the train instances ({layout.train_instances})")
    tokenizer, train, evaluation = tokenize(parse_source(text), layout)
    write, suffix = WRITERS[data_format]
    (out / "eval_10k").mkdir(parents=True, exist_ok=True)
    written = []
    for i, rows in enumerate(np.array_split(np.arange(layout.train_instances), shards)):
        path = out / f"part-{i:05d}-of-{shards:05d}{suffix}"
        write(path, {k: v[rows] for k, v in train.items()})
        written.append(path)
    written.append(out / "eval_10k" / f"part-00000{suffix}")
    write(written[-1], evaluation)
    atomic_write_text(out / "tokenizer.json", tokenizer.to_str())
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    atomic_write_text(out / "vocab.txt", "".join(f"{token}\n" for token, _ in vocab))
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainclock.workloads.bert.data.export",
                                description=__doc__.splitlines()[0])
    p.add_argument("text", help="a .txt file or a folder of them")
    p.add_argument("out", type=Path)
    p.add_argument("--format", choices=sorted(WRITERS), default="tfrecord")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--train-instances", type=int, default=10_000)
    p.add_argument("--eval-instances", type=int, default=1_000)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--max-predictions", type=int, default=76)
    p.add_argument("--vocab-size", type=int, default=30522)
    args = p.parse_args(argv)
    for name in ("shards", "train_instances", "eval_instances", "seq_len", "max_predictions", "vocab_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be a positive number")
    layout = Layout(args.vocab_size, args.seq_len, args.max_predictions, args.train_instances, args.eval_instances)
    try:
        written = export(args.text, args.out, layout, args.format, args.shards)
    except (TrainclockError, ValueError, OSError) as e:
        print(f"export: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.train_instances:,} train and {args.eval_instances:,} eval instances in {len(written)} "
          f"{args.format} files and the vocabulary to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
