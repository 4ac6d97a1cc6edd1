"""Training throughput and MFU of a BERT CPU tier, trainclock's step against the plain loop a user
would otherwise write, side by side on the same batches and start weights.

  trainclock: the generic loop's train_step over the bert job (gathered masked-LM head, global
              norm clipping, LAMB), eager fp32 and bf16 autocast, and
              (--compile) fp32 under torch.compile
  plain:      transformers' own BertForPreTraining forward with labels (-100 except the masked
              positions, next_sentence_label), torch AdamW, no trainclock code

It prints tokens/s, MFU against the machine's matmul peak (the faster of bf16 and fp32, measured
around each timing: the CPU is shared and its speed drifts) and the ratio trainclock / plain.
The FLOPs are the same for both (the model's useful work: masked-LM head on the masked positions).

  python benchmarks/bert_throughput.py [--member bert-mini] [--steps 8] [--compile]
"""

from __future__ import annotations

import argparse
import os

import torch
from transformers import BertForPreTraining

from trainclock.distributed.context import single_process
from trainclock.train.step import train_step
from trainclock.workload.base import RunSettings
from trainclock.workloads.bert import WORKLOAD
from trainclock.workloads.bert.model import bert_config
from trainclock.workloads.bert.spec import get_member
from timing import CPU, autocast_for, timed_at_peak


def plain_step(job, precision: str, batches, compiled: bool):
    spec = get_member(job.name)
    model = BertForPreTraining(bert_config(spec.shape, spec.dropout))
    model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in job.model.state_dict().items()})
    forward = torch.compile(model) if compiled else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = autocast_for(precision)

    def step(s: int) -> None:
        b = batches[s]
        labels = torch.full_like(b["input_ids"], -100)
        real = b["masked_lm_weights"] > 0
        rows = torch.arange(len(labels)).unsqueeze(1).expand_as(real)
        labels[rows[real], b["masked_lm_positions"][real]] = b["masked_lm_ids"][real]
        with autocast():
            out = forward(input_ids=b["input_ids"], attention_mask=b["input_mask"], token_type_ids=b["segment_ids"],
                        labels=labels, next_sentence_label=b["next_sentence_labels"])
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--member", default="bert-mini")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--compile", action="store_true", help="also time both loops under torch.compile (fp32)")
    args = p.parse_args()
    spec = get_member(args.member)
    tokens = spec.global_batch_size * spec.seq_len
    print(f"{args.member}: {spec.global_batch_size} x {spec.seq_len} tokens per step, {args.steps} timed steps, "
          f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    ctx = single_process()
    modes = [("fp32", "fp32", False), ("bf16", "bf16", False)] + ([("fp32 compiled", "fp32", True)] if args.compile else [])
    for label, precision, compiled in modes:
        # starts from the tier's phase-1 checkpoint
        job = WORKLOAD.build_job(spec, ctx, CPU, 1, RunSettings(compile=compiled))
        batches = [job.batch(s, slice(0, job.global_batch_size)) for s in range(args.steps + 1)]  # the loop's own batches, for both loops
        plain = plain_step(job, precision, batches, compiled)  # copies the start weights before trainclock trains
        optimizer, autocast = job.optimizer.build(job.model), autocast_for(precision)

        def ours(s: int) -> None:
            train_step(job, optimizer, batches[s], job.micro_batch_size, autocast, CPU, ctx)

        row = {}
        for name, step in (("trainclock", ours), ("plain", plain)):
            seconds, peak = timed_at_peak(step, args.steps, first=1, warm_up=1)
            row[name] = (tokens / seconds, job.flops_per_sample * spec.global_batch_size / seconds / peak)
            print(f"  {label:13} {name:10} {row[name][0]:8,.0f} tokens/s  MFU {row[name][1]:6.1%}  "
                  f"(peak {peak / 1e9:,.0f} GFLOP/s)")
        print(f"  {label:13} ratio trainclock / plain: {row['trainclock'][0] / row['plain'][0]:.2f}")


if __name__ == "__main__":
    main()
