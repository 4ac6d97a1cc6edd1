"""Training throughput and MFU of any members on this machine (by default the GPT-3 CPU members).

For each member and mode (eager fp32 = the plain reference, eager bf16, compiled bf16) it builds the
member's job through the workload interface as `trainclock run` does and runs the real training
step of trainclock's generic loop over it (train.step.train_step: micro-batches, clipping, the
job's optimizer) on the loop's own batches, read ahead, and prints units/s (tokens, images,
samples: the member's progress unit), achieved FLOP/s (the job's FLOPs per sample; for GPT-3
6N + 12*L*D*T per token) and MFU against the machine's matmul peak (the faster of bf16 and fp32;
bf16 on a CPU with bf16 instructions) measured right before and after that mode (the CPU is shared
and its speed drifts, so every timing is paired with its own calibration).

  python benchmarks/throughput.py [--members gpt3-tiny,gpt3-mini] [--steps 10] [--modes fp32,bf16,compiled]
  python benchmarks/throughput.py --member resnet-mini --modes fp32,bf16 --steps 4

The per-benchmark scripts (benchmarks/*_throughput.py) time the same step beside the plain loop a
user would otherwise write.
"""

from __future__ import annotations

import torch

import harness
from trainclock.device.peak import matmul_peak_flops, resolve_precision


def main() -> None:
    p = harness.parser(__doc__, steps=10)
    p.add_argument("--members", default="gpt3-tiny,gpt3-mini", help="comma-separated members (default gpt3-tiny,gpt3-mini)")
    p.add_argument("--member", action="append", help="a member to time (repeatable; replaces --members)")
    p.add_argument("--modes", help="default: fp32,bf16,compiled; fp32 alone where bf16 is slower (no bf16 instructions)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    device = torch.device(args.device)
    members = args.member or args.members.split(",")
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
    harness.print_measurements(members, args.modes.split(","), args.steps, device)


if __name__ == "__main__":
    main()
