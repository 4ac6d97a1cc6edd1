"""Training throughput and MFU of the GPT-3 members on this machine.

For each member and mode (eager fp32 = the plain reference, eager bf16, compiled bf16) it runs
the real training step of trainclock's generic loop (train.step.train_step over the gpt3 job:
forward, backward, clip, fused AdamW) on real token batches, and prints tokens/s, achieved FLOP/s (6N + 12*L*D*T per
token) and MFU against the machine's matmul peak (the faster of bf16 and fp32; bf16 on a CPU with
bf16 instructions) measured right before and after that mode (the CPU
is shared and its speed drifts, so every timing is paired with its own calibration).

  python benchmarks/throughput.py [--members gpt3-tiny,gpt3-mini] [--steps 10] [--modes fp32,bf16,compiled]
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch

from trainclock.device.peak import matmul_peak_flops, resolve_precision
from trainclock.distributed.context import single_process
from trainclock.train.step import train_step
from trainclock.workloads.gpt3.data.batches import train_batch
from trainclock.workloads.gpt3.data.prepare import prepare
from trainclock.workloads.gpt3.data.sources import parse_source
from trainclock.workloads.gpt3.model import GPT
from trainclock.workloads.gpt3.spec import get_member
from trainclock.workloads.gpt3.workload import gpt3_job

MODES = {"fp32": (torch.float32, False), "bf16": (torch.bfloat16, False), "compiled": (torch.bfloat16, True)}


def machine_peak(device: torch.device) -> float:
    return max(matmul_peak_flops(device, torch.bfloat16), matmul_peak_flops(device, torch.float32))


def measure(member: str, mode: str, steps: int, device: torch.device) -> dict:
    spec = get_member(member)
    dtype, compiled = MODES[mode]
    data = prepare(parse_source(spec.corpus), spec.shape.vocab_size)
    torch.manual_seed(0)
    model = GPT(spec.shape).to(device)
    runnable = torch.compile(model) if compiled else model
    job = gpt3_job(spec, runnable, None, None, None, dataset=spec.corpus, eval_sequences=spec.eval_sequences)
    optimizer = job.optimizer.build(model)
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if dtype == torch.bfloat16 else contextlib.nullcontext

    ctx = single_process()

    def step(i: int) -> None:
        batch = train_batch(data.train, 0, i, spec.global_batch_size, spec.seq_len)
        train_step(job, optimizer, batch, spec.micro_batch_size, autocast, device, ctx)

    t0 = time.perf_counter()
    for i in range(3):  # warm-up: compilation, first-touch memory
        step(i)
    warmup_s = time.perf_counter() - t0
    peak_before = machine_peak(device)
    t0 = time.perf_counter()
    for i in range(steps):
        step(3 + i)
    seconds = time.perf_counter() - t0
    peak_after = machine_peak(device)
    tokens_per_s = steps * spec.tokens_per_step / seconds
    flops = tokens_per_s * spec.shape.flops_per_token(spec.seq_len)
    peak = (peak_before + peak_after) / 2
    return {"member": member, "mode": mode, "tokens_per_s": tokens_per_s, "gflops": flops / 1e9,
            "peak_gflops": peak / 1e9, "mfu": flops / peak, "warmup_s": warmup_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", default="gpt3-tiny,gpt3-mini")
    p.add_argument("--modes", help="default: fp32,bf16,compiled; fp32 alone where bf16 is slower (no bf16 instructions)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    device = torch.device(args.device)
    if args.modes is None:
        bf16_pays = resolve_precision("auto", device) == "bf16"
        args.modes = "fp32,bf16,compiled" if bf16_pays else "fp32"
        if not bf16_pays:
            print("bf16 matmuls are slower than fp32 here (no bf16 instructions): measuring fp32 only; "
                  "--modes fp32,bf16 forces them (a bf16 step can take minutes)")
    fp32_peak = matmul_peak_flops(device, torch.float32)
    bf16_peak = matmul_peak_flops(device, torch.bfloat16)
    print(f"device {device}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"matmul peak: fp32 {fp32_peak / 1e9:,.0f} GFLOP/s, bf16 {bf16_peak / 1e9:,.0f} GFLOP/s")
    print(f"{'member':<10} {'mode':<9} {'tokens/s':>10} {'GFLOP/s':>8} {'peak':>9} {'MFU':>6} {'vs fp32':>8} {'warm-up s':>9}")
    for member in args.members.split(","):
        reference = None
        for mode in args.modes.split(","):
            r = measure(member, mode, args.steps, device)
            reference = reference or r["tokens_per_s"]
            print(f"{member:<10} {mode:<9} {r['tokens_per_s']:>10,.0f} {r['gflops']:>8,.1f} {r['peak_gflops']:>9,.0f} "
                  f"{r['mfu']:>6.1%} {r['tokens_per_s'] / reference:>7.2f}x {r['warmup_s']:>9.1f}")


if __name__ == "__main__":
    main()
