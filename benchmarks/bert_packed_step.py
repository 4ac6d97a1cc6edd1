"""BERT on packed rows against one sequence a row, on the CPU: the tokens each sequence costs and
the CPU time of one training step (forward, backward, SGD update) of a small BERT at sequence 512,
on the same sequences in the same run, alternating.

The sequences are bert-large's made-up sample data (data/sample.py: the Wikipedia set's spread of
lengths, about 240 of 512 tokens real), packed as write_sample packs them (next-fit, at most 3 a
row). Unpacked, every sequence computes all 512 slots; packed, a row of about 2 sequences shares
them, attended apart (block-diagonal mask). Dropout is off, so both layouts give the same loss.
Timed with time.process_time on one thread, so other work on a shared machine weighs less.

  python benchmarks/bert_packed_step.py [--sequences 32] [--layers 4] [--hidden 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np
import torch

from timing import cpu_timed
from trainclock.device import system
from trainclock.workloads.bert.data import hdf5
from trainclock.workloads.bert.data.batches import as_tensors
from trainclock.workloads.bert.data.sample import instances
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import BertShape

SEQ, PRED, VOCAB = 512, 76, 30522


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sequences", type=int, default=32, help="sequences a step (the unpacked batch's rows)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--steps", type=int, default=2, help="timed steps a round")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    arrays = instances(args.sequences, SEQ, PRED, VOCAB, np.random.default_rng(args.seed))
    packed = hdf5.pack(arrays, PRED)
    packed["masked_lm_weights"] = (packed["masked_lm_positions"] != 0).astype(np.float32)
    one_a_row, packs = as_tensors(arrays), as_tensors(packed)
    rows, real = len(packs["input_ids"]), int(arrays["input_mask"].sum())
    shape = BertShape(n_layer=args.layers, hidden=args.hidden, n_head=args.hidden // 64,
                      intermediate=4 * args.hidden, vocab_size=VOCAB)
    torch.manual_seed(args.seed)
    model = build_model(shape, dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: every step sees the same weights

    def step(batch: dict[str, torch.Tensor]):
        def run() -> float:
            optimizer.zero_grad()
            loss = model(**batch)[0]
            loss.backward()
            optimizer.step()
            return float(loss.detach())
        return run

    agree = abs(step(one_a_row)() - step(packs)())
    print(f"machine: {system.cpu_model()}, 1 thread, load {os.getloadavg()[0]:.1f}, torch {torch.__version__}; "
          f"BERT {args.layers} layers, width {args.hidden}, sequence {SEQ}, {args.sequences} sequences a step")
    print(f"tokens computed per sequence: {SEQ} one a row, {SEQ * rows / args.sequences:.0f} packed "
          f"({args.sequences / rows:.2f} sequences a {SEQ}-token row, {rows} rows); "
          f"{real / args.sequences:.0f} real; loss difference {agree:.1e}")
    unpacked_s, packed_s = [], []
    for r in range(args.repeats):
        unpacked_s.append(cpu_timed(step(one_a_row), args.steps))
        packed_s.append(cpu_timed(step(packs), args.steps))
        print(f"round {r + 1}: one a row {unpacked_s[-1]:.2f} s, packed {packed_s[-1]:.2f} s CPU a step; "
              f"load {os.getloadavg()[0]:.1f}")
    u, k = statistics.median(unpacked_s), statistics.median(packed_s)
    print(f"median of {args.repeats}: {u:.2f} s vs {k:.2f} s CPU a step, packed {u / k:.2f}x faster; "
          f"{args.sequences / k:.1f} vs {args.sequences / u:.1f} sequences/s on one thread")


if __name__ == "__main__":
    main()
