"""BERT on packed rows against one sequence a row, on the CPU: the rows each batch of sequences
takes, and the CPU time of one training step (forward, backward, SGD update; micro-batches
accumulated as the loop does) on the same sequences in the same run, alternating.

Two packers. `batches` is what training does (data/batches.packed_train_batch): each micro-batch's
sequences, exactly the unpacked path's, packed first-fit-decreasing into rows of the sequence
length, the row count padded up to a bucket (packing.bucket_rows). `shards` packs the whole step
as the sample shards are written (hdf5.pack: next-fit, at most 3 a row), as one forward.

The sequences are bert-large's made-up sample data (data/sample.py: the Wikipedia set's spread of
lengths, about 240 of 512 tokens real, scaled to the sequence length), or with --data tier a CPU
tier's own prepared data (its English text at 128, cached in the data home). Dropout is off, so
both layouts give the same loss. Timed with time.process_time on one thread, so other work on a
shared machine weighs less.

  python benchmarks/bert_packed_step.py [--member bert-tiny] [--data sample|tier] [--packer batches|shards]
      [--sequences 32] [--micro 32] [--layers 4] [--hidden 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np
import torch

from timing import cpu_timed
from trainclock.device import system
from trainclock.workload.batches import TreeBatch
from trainclock.workloads.bert.data import hdf5
from trainclock.workloads.bert.data.batches import PackedBatches, as_tensors, model_inputs, packed_train_batch, train_batch
from trainclock.workloads.bert.data.sample import instances
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import BertShape, get_member

SEQ, PRED, VOCAB = 512, 76, 30522
STAT_STEPS = 100  # steps whose packing the row counts are taken over


def tier_data(member: str) -> dict[str, torch.Tensor]:
    """The CPU tier's own training instances (prepared once, cached in the data home)."""
    from trainclock.workloads.bert.data.prepare import prepare
    from trainclock.workloads.bert.data.text import parse_source
    from trainclock.workloads.bert.workload import data_layout

    spec = get_member(member)
    return as_tensors(prepare(parse_source(spec.corpus), data_layout(spec)).train)


def row_counts(train: dict[str, torch.Tensor], sequences: int, micro: int, seq_len: int, predictions: int,
               seed: int) -> tuple[list[int], list[int]]:
    """Per micro-batch over STAT_STEPS steps: (rows after bucket padding, rows the sequences need)."""
    padded, needed = [], []
    for step in range(STAT_STEPS):
        for rows in packed_train_batch(train, seed, step, sequences, slice(None), micro, seq_len, predictions).micro:
            padded.append(len(rows["input_ids"]))
            needed.append(int((rows["next_sentence_weights"].sum(1) > 0).sum()))
    return padded, needed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--member", help="a member's shape, sequence length and micro-batch (default: --layers/--hidden at 512)")
    p.add_argument("--data", choices=("sample", "tier"), default="sample",
                   help="bert-large's made-up lengths, or the CPU tier's own prepared data")
    p.add_argument("--packer", choices=("batches", "shards"), default="batches")
    p.add_argument("--sequences", type=int, default=32, help="sequences a step (the unpacked batch's rows)")
    p.add_argument("--micro", type=int, help="sequences a micro-batch (default: the member's, else all)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--steps", type=int, default=2, help="timed steps a round")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.member:
        spec = get_member(args.member)
        shape, seq_len, predictions = spec.shape, spec.seq_len, spec.max_predictions
        micro = args.micro or min(spec.micro_batch_size, args.sequences)
    else:
        shape = BertShape(n_layer=args.layers, hidden=args.hidden, n_head=args.hidden // 64,
                          intermediate=4 * args.hidden, vocab_size=VOCAB)
        seq_len, predictions, micro = SEQ, PRED, args.micro or args.sequences
    if args.data == "tier":
        if not args.member:
            p.error("--data tier needs --member (a CPU tier)")
        train = tier_data(args.member)
    else:
        train = as_tensors(instances(max(4096, args.sequences), seq_len, predictions, shape.vocab_size,
                                     np.random.default_rng(args.seed)))

    one_a_row = TreeBatch().micro_batches(train_batch(train, args.seed, 0, args.sequences), micro)
    if args.packer == "batches":
        step0 = packed_train_batch(train, args.seed, 0, args.sequences, slice(None), micro, seq_len, predictions)
        packs = PackedBatches().micro_batches(step0, micro)
        rows = sum(len(m["input_ids"]) for m in step0.micro)
    else:
        micro = args.sequences  # the whole step packed as shards are, one forward
        arrays = {k: v.numpy() for k, v in train_batch(train, args.seed, 0, args.sequences).items()}
        packed = hdf5.pack(arrays, predictions)
        packed["masked_lm_weights"] = (packed["masked_lm_positions"] != 0).astype(np.float32)
        one_a_row, packs = TreeBatch().micro_batches(as_tensors(arrays), micro), [as_tensors(packed)]
        rows = len(packs[0]["input_ids"])
    real = int(sum(int((m["input_mask"] != 0).sum()) for m in one_a_row))
    torch.manual_seed(args.seed)
    model = build_model(shape, dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: every step sees the same weights

    def step(micro_batches: list):
        def run() -> float:  # the loop's accumulation: each micro-batch's mean loss over their count
            total = 0.0
            for m in micro_batches:
                loss = model(**model_inputs(m))[0]
                (loss / len(micro_batches)).backward()
                total += float(loss.detach()) / len(micro_batches)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return total
        return run

    agree = abs(step(one_a_row)() - step(packs)())
    print(f"machine: {system.cpu_model()}, 1 thread, load {os.getloadavg()[0]:.1f}, torch {torch.__version__}; "
          f"BERT {shape.n_layer} layers, width {shape.hidden}, sequence {seq_len}, {args.sequences} sequences a step "
          f"in micro-batches of {micro}, {args.data} data, {args.packer} packer")
    print(f"tokens computed per sequence: {seq_len} one a row, {seq_len * rows / args.sequences:.0f} packed "
          f"({args.sequences / rows:.2f} sequences a {seq_len}-token row, {rows} rows); "
          f"{real / args.sequences:.0f} real; loss difference {agree:.1e}")
    if args.packer == "batches":
        padded, needed = row_counts(train, args.sequences, micro, seq_len, predictions, args.seed)
        print(f"rows a micro-batch of {micro} sequences over {STAT_STEPS} steps: mean {np.mean(padded):.2f} "
              f"(needed {np.mean(needed):.2f}, min {min(padded)}, max {max(padded)}, "
              f"{len(set(padded))} shapes: {sorted(set(padded))}); {micro / np.mean(padded):.2f} sequences a row")
    unpacked_s, packed_s = [], []
    for r in range(args.repeats):
        unpacked_s.append(cpu_timed(step(one_a_row), args.steps))
        packed_s.append(cpu_timed(step(packs), args.steps))
        print(f"round {r + 1}: one a row {unpacked_s[-1]:.3f} s, packed {packed_s[-1]:.3f} s CPU a step; "
              f"load {os.getloadavg()[0]:.1f}")
    u, k = statistics.median(unpacked_s), statistics.median(packed_s)
    print(f"median of {args.repeats}: {u:.3f} s vs {k:.3f} s CPU a step, packed {u / k:.2f}x faster; "
          f"{args.sequences / k:.1f} vs {args.sequences / u:.1f} sequences/s on one thread")


if __name__ == "__main__":
    main()
