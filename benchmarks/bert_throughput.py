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

import torch
from transformers import BertForPreTraining

import harness
from trainclock.workload.base import RunSettings
from trainclock.workloads.bert.model import bert_config
from timing import autocast_for


def plain_step(job, spec, precision: str, batches, compiled: bool):
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
    p = harness.parser(__doc__, member="bert-mini", steps=8)
    p.add_argument("--compile", action="store_true", help="also time both loops under torch.compile (fp32)")
    args = p.parse_args()
    bench = harness.Bench.build(args.member)
    spec = bench.spec
    tokens = spec.global_batch_size * spec.seq_len
    bench.header(args.steps, f"{spec.global_batch_size} x {spec.seq_len} tokens per step")
    modes = [("fp32", "fp32", False), ("bf16", "bf16", False)] + ([("fp32 compiled", "fp32", True)] if args.compile else [])
    for i, (label, precision, compiled) in enumerate(modes):
        if i:  # a fresh job per mode, from the tier's phase-1 checkpoint
            bench = bench.rebuild(RunSettings(compile=compiled))
        batches = bench.batches(args.steps + 1)  # the loop's own batches, for both loops
        plain = plain_step(bench.job, spec, precision, batches, compiled)  # copies the start weights first
        harness.compare({"trainclock": bench.step(batches, precision), "plain": plain}, bench, args.steps,
                        label=f"{label:13}", unit="tokens", units_per_step=tokens)


if __name__ == "__main__":
    main()
