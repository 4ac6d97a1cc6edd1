"""The RNN-T transducer loss at full size on the CPU: trainclock's loss (forward-backward with the
gradient written out, workloads/rnnt/loss.py) against its previous form (the same recursion
differentiated by autograd, benchmarks/reference/rnnt_loss_autograd.py), on the same lattices in
the same run, alternating. Only the loss over the lattice log-probabilities is timed (forward and
backward); the joint network before it is the same in both.

Full size: rnnt-librispeech's micro-batch of 128 utterances (its 1,024 a step over 8 GPUs) of up to
280 stacked frames and 130 word pieces, lengths drawn below those. --batch 16 shows the loss where
the per-step overhead of the recursion's small operations weighs most.

  python benchmarks/rnnt_loss_speed.py [--batch 128] [--frames 280] [--labels 130] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

from timing import timed
from trainclock.device import system
from trainclock.workloads.rnnt.loss import transducer_loss

sys.path.insert(0, str(Path(__file__).parent / "reference"))
import rnnt_loss_autograd  # noqa: E402  (beside this script)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--frames", type=int, default=280)
    p.add_argument("--labels", type=int, default=130)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.manual_seed(0)
    B, T, U = args.batch, args.frames, args.labels
    # lattice log-probabilities as the joint gives them: log-softmax values, so both are negative
    blank = torch.randn(B, T, U + 1).mul(2).sub(3).clamp(max=-1e-3).requires_grad_()
    emit = torch.randn(B, T, U + 1).mul(2).sub(3).clamp(max=-1e-3).requires_grad_()
    frames = torch.randint(T // 2, T + 1, (B,))
    frames[0] = T
    labels = torch.randint(U // 2, U + 1, (B,))
    labels[0] = U

    def step(loss_fn):
        blank.grad = emit.grad = None
        loss_fn(blank, emit, frames, labels).mean().backward()
        return blank.grad.clone(), emit.grad.clone()

    ours_grads, reference_grads = step(transducer_loss), step(rnnt_loss_autograd.transducer_loss)
    agree = max(float((a - b).abs().max()) for a, b in zip(ours_grads, reference_grads))
    print(f"machine: {system.cpu_model()}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}, "
          f"torch {torch.__version__}; lattice B={B} T={T} U+1={U + 1}")
    print(f"largest gradient difference between the two: {agree:.2e}")
    ours, reference = [], []
    for r in range(args.repeats):
        ours.append(timed(lambda _: step(transducer_loss), 3, warm_up=1))
        reference.append(timed(lambda _: step(rnnt_loss_autograd.transducer_loss), 3, warm_up=1))
        print(f"round {r + 1}: written-out gradient {ours[-1] * 1e3:.1f} ms, autograd {reference[-1] * 1e3:.1f} ms "
              f"(forward + backward of {B} utterances); load {os.getloadavg()[0]:.1f}")
    o, a = statistics.median(ours), statistics.median(reference)
    print(f"median of {args.repeats}: {o * 1e3:.1f} ms vs {a * 1e3:.1f} ms, {a / o:.1f}x faster; "
          f"{B / o:,.0f} utterances/s of loss on this CPU")


if __name__ == "__main__":
    main()
