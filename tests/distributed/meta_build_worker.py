"""One rank of a 2-process gloo job that builds gpt3-tiny on the meta device at a layout (argv[1]:
pp, tp or fsdp), materialises its shards on the CPU and trains one step; rank 0 prints, as one
JSON line, what each rank found: every weight finite, the pipeline's head equal to the embedding,
the step's loss."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.env import current
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.cli import exit_process
from trainclock.workloads.gpt3.pipeline import PipelinedGPT
from trainclock.workloads.gpt3.workload import GPT3Workload, build_model

LAYOUTS = {"pp": Layout.for_world(2, pp=2), "tp": Layout.for_world(2, tp=2),
           "fsdp": replace(Layout.for_world(2, fsdp=True), precision="bf16")}


def main(kind: str) -> None:
    env = current()
    dist.init_process_group("gloo")
    layout = LAYOUTS[kind]
    ctx = ParallelContext(env, layout, layout.mesh("cpu"))
    spec = GPT3Workload().resolve("gpt3-tiny", RunSettings(), layout, torch.device("cpu"))
    torch.manual_seed(3)
    model = build_model(spec, ctx, torch.device("cpu"), on_meta=True)
    weights = [p.full_tensor() if isinstance(p, DTensor) else p for p in model.parameters()]
    found = {"finite": all(bool(torch.isfinite(w).all()) for w in weights)}
    x = torch.randint(0, spec.shape.vocab_size, (spec.global_batch_size // layout.dp, spec.seq_len))
    if isinstance(model, PipelinedGPT):
        tied = (model.tok_emb.weight if model.is_first else model.head).detach()
        both = [torch.empty_like(tied) for _ in range(2)]
        dist.all_gather(both, tied)
        found["head equals embedding"] = torch.equal(both[0], both[1])
        loss = model.step((x, x))
    else:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x, x)
        loss.backward()
    found["loss"] = round(float(loss), 4)
    every = [None, None]
    dist.all_gather_object(every, found)
    if env.is_main:  # one line: the ranks' prints would interleave on the shared pipe
        print(json.dumps(every))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    exit_process(0)  # as the CLI's workers leave: the mesh and sharded parameters freed at shutdown abort gloo
