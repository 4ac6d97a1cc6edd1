"""`trainclock run gpt3-mini` end to end against nanoGPT, the minimal GPT trainer, on the same shape
and corpus, alternating in one process, so both see the same machine at the same time.

  trainclock: the run a user starts (commands/run.py's path: execute with the CLI's defaults, auto
              precision: bf16 autocast on a CPU with bf16 instructions), to its target; its summary's
              tokens/s (training steps, evaluation excluded) and MFU against the matmul peak it measured
  nanoGPT:    benchmarks/reference/nanogpt_model.py (nanoGPT's model.py, unchanged) trained by the body
              of its train.py as its README runs it on a CPU (--device=cpu --compile=False; train.py uses
              no autocast on a CPU, so fp32): get_batch from the same train.bin memmap, forward,
              backward, clip 1.0, AdamW from configure_optimizers, zero_grad(set_to_none=True); the
              same batch (16 x 256 tokens), learning rate and betas; --steps timed after 3 warm-up

Prints each round and the medians: tokens/s of each, trainclock's MFU, and the ratio.

  python benchmarks/nanogpt_compare.py [--member gpt3-mini] [--rounds 3] [--steps 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from trainclock.device import system
from trainclock.distributed.layout import Layout
from trainclock.train.options import TrainOptions
from trainclock.train.run import RunRequest, execute
from trainclock.workload.base import RunSettings
from trainclock.workloads.gpt3 import WORKLOAD
from trainclock.workloads.gpt3.data.prepare import prepare
from trainclock.workloads.gpt3.data.sources import parse_source
from trainclock.workloads.gpt3.spec import get_member

from timing import timed

sys.path.insert(0, str(Path(__file__).parent / "reference"))
import nanogpt_model  # noqa: E402  (vendored beside this script)

CPU = torch.device("cpu")


def trainclock_run(member: str, seed: int) -> tuple[float, float, float, float]:
    """(tokens/s, MFU, time-to-train s, measured matmul peak FLOP/s) of one `trainclock run MEMBER --seed SEED`."""
    spec = WORKLOAD.resolve(member, RunSettings(), Layout(), CPU)
    with tempfile.TemporaryDirectory() as out:
        result = execute(RunRequest(workload=WORKLOAD, spec=spec, settings=RunSettings(), out=Path(out), seed=seed,
                                    options=TrainOptions(device=CPU, precision="auto"), progress=False))
    return result.units_per_s, result.mfu, result.time_to_train_s, result.peak_flops


def nanogpt_tokens_per_s(member: str, steps: int, seed: int) -> float:
    spec = get_member(member)
    shape = spec.shape
    data_dir = prepare(parse_source(spec.corpus), shape.vocab_size).folder
    block_size, batch_size = shape.context, spec.micro_batch_size
    torch.manual_seed(seed)
    config = nanogpt_model.GPTConfig(block_size=block_size, vocab_size=shape.vocab_size, n_layer=shape.n_layer,
                                     n_head=shape.n_head, n_embd=shape.d_model, dropout=0.0, bias=True)
    model = nanogpt_model.GPT(config)
    optimizer = model.configure_optimizers(spec.weight_decay, spec.learning_rate, (spec.adam_beta1, spec.adam_beta2), "cpu")

    def get_batch():  # train.py's, for split "train" on a CPU
        data = np.memmap(os.path.join(data_dir, "train.bin"), dtype=np.uint16, mode="r")
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
        return x, y

    def step():
        x, y = get_batch()
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return batch_size * block_size / timed(lambda _: step(), steps, warm_up=3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--member", default="gpt3-mini")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    print(f"machine: {system.cpu_model()}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}, "
          f"torch {torch.__version__}")
    ours, mfus, theirs, peaks = [], [], [], []
    for r in range(args.rounds):
        plain = nanogpt_tokens_per_s(args.member, args.steps, seed=r + 1)
        tokens, mfu, seconds, peak = trainclock_run(args.member, seed=r + 1)
        ours.append(tokens), mfus.append(mfu), theirs.append(plain), peaks.append(peak)
        print(f"round {r + 1}: trainclock {tokens:,.0f} tokens/s (MFU {mfu:.1%} of {peak / 1e9:,.0f} GFLOP/s, "
              f"{seconds:.1f} s to target); "
              f"nanoGPT {plain:,.0f} tokens/s (fp32); ratio {tokens / plain:.2f}; load {os.getloadavg()[0]:.1f}")
    t, n = statistics.median(ours), statistics.median(theirs)
    # the ratio moves with the machine's bf16 matmul peak (trainclock trains in bf16 where it is faster,
    # nanoGPT's CPU recipe in fp32): it is only comparable beside that peak
    print(f"median of {args.rounds}: trainclock {t:,.0f} tokens/s, MFU {statistics.median(mfus):.1%}; "
          f"nanoGPT {n:,.0f} tokens/s; ratio {t / n:.2f} at a measured matmul peak of "
          f"{statistics.median(peaks) / 1e9:,.0f} GFLOP/s")


if __name__ == "__main__":
    main()
