"""One LAMB step over BERT-large's parameters: trainclock's multi-tensor step (torch._foreach_* ops,
src/trainclock/optim/lamb.py) against its previous form (a Python loop over the ~400 tensors,
benchmarks/reference/lamb_loop.py), on the same parameters and gradients in the same run,
alternating. Each keeps its own moments; both update the same weights (the values drift, the work
does not).

Shapes: bert-large's (24 layers, width 1024, intermediate 4096, vocab 30522: NVIDIA pads it to
30528) from the project's model built on the meta device; fp32 tensors on --device. 335M
parameters take about 11 GB here (weights, gradients, two moments per optimizer, the foreach
step's two transient copies). --layers scales the encoder down: fewer elements, the same kinds of
tensors, so the per-tensor overhead weighs more. --hidden 64 --vocab 1024 keeps all 24 layers'
~400 tensors but makes them small: the step is then mostly per-op overhead, as on a GPU, where the
arithmetic of the full-size step takes a few milliseconds. On a CPU the times are process time (all
threads) and wall time; on a GPU wall time between synchronisations.

  python benchmarks/lamb_step.py [--layers 24] [--hidden 1024] [--vocab 30522] [--steps 3] [--rounds 3] [--device cpu] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.device import system
from trainclock.optim.lamb import LambOptimizer
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import get_member

sys.path.insert(0, str(Path(__file__).parent / "reference"))
import lamb_loop  # noqa: E402  (beside this script)


def bert_shapes(layers: int, hidden: int, vocab: int) -> list[torch.Size]:
    """BertForPreTraining's parameter shapes (the decoder tied to the word embeddings: counted once)."""
    shape = replace(get_member("bert-large").shape, n_layer=layers, hidden=hidden, intermediate=4 * hidden,
                    n_head=max(1, hidden // 64), vocab_size=vocab)
    with torch.device("meta"):  # shapes only: no 1.3 GB of initialisation
        model = build_model(shape, dropout=0.0)
    return [p.shape for p in model.parameters()]


def timed(step: Callable[[], object], steps: int, device: torch.device) -> tuple[float, float]:
    """(process seconds, wall seconds) per step over `steps` steps."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.process_time() - cpu) / steps, (time.perf_counter() - wall) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=1024, help="width (intermediate 4x, a head per 64)")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--steps", type=int, default=3, help="timed steps per round and optimizer")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    shapes = bert_shapes(args.layers, args.hidden, args.vocab)
    params = [torch.nn.Parameter(torch.empty(s, device=device).normal_(0, 0.02)) for s in shapes]
    for w in params:
        w.grad = torch.empty_like(w).normal_(0, 1e-3)
    # parameter_groups' split: decay on matrices only
    groups = lambda: [{"params": [w for w in params if w.dim() >= 2], "weight_decay": 0.01},  # noqa: E731
                      {"params": [w for w in params if w.dim() < 2], "weight_decay": 0.0}]
    hyper = dict(lr=4e-4, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    ours, reference = LambOptimizer(groups(), **hyper), lamb_loop.LoopLambOptimizer(groups(), **hyper)
    count = sum(w.numel() for w in params)
    where = system.cpu_model() if device.type == "cpu" else torch.cuda.get_device_name(device)
    print(f"machine: {where}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}, "
          f"torch {torch.__version__}; bert {args.layers} layers, width {args.hidden}, vocab {args.vocab}: "
          f"{len(params)} tensors, {count / 1e6:.1f}M fp32 parameters on {device}")
    ours.step(), reference.step()  # untimed: fills the moments, first-touch of the allocator
    new, old = [], []
    for r in range(args.rounds):
        new.append(timed(ours.step, args.steps, device))
        old.append(timed(reference.step, args.steps, device))
        print(f"round {r + 1}: foreach {new[-1][0] * 1e3:.1f} ms process / {new[-1][1] * 1e3:.1f} ms wall, "
              f"loop {old[-1][0] * 1e3:.1f} ms process / {old[-1][1] * 1e3:.1f} ms wall per step; "
              f"load {os.getloadavg()[0]:.1f}")
    for label, i in (("process", 0), ("wall", 1)):
        n, o = statistics.median(t[i] for t in new), statistics.median(t[i] for t in old)
        print(f"median of {args.rounds} ({label} time): foreach {n * 1e3:.1f} ms vs loop {o * 1e3:.1f} ms "
              f"per step, loop / foreach = {o / n:.2f}")


if __name__ == "__main__":
    main()
