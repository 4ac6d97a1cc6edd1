"""Training throughput and MFU of a DLRM-DCNv2 CPU tier, trainclock's step against the plain loop a
user would otherwise write, side by side on the same batches and start weights.

  trainclock: the generic loop's train_step over the dlrm_dcnv2 job (its batches from the
              memory-mapped Criteo day files, the package's model, Adagrad), eager fp32 and bf16
  plain:      a DLRM-DCNv2 written here in plain PyTorch the way torchrec's example feeds it
              (one flat id list with offsets per table, as a KeyedJaggedTensor holds them),
              BCEWithLogits, torch.optim.Adagrad; no trainclock code in its step

It also times the loader alone (batches/s of the day files), to show it is not the bottleneck.
Prints samples/s, MFU against the machine's matmul peak (the faster of bf16 and fp32, measured
around each timing: the CPU is shared and its speed drifts) and the ratio trainclock / plain.

  python benchmarks/dlrm_throughput.py [--member dlrm-mini] [--steps 20]
"""

from __future__ import annotations

import copy

import torch
from torch import nn

import harness
from timing import autocast_for


class PlainDlrm(nn.Module):
    """DLRM-DCNv2 as a user writes it from the paper: the same parameters under the same names."""

    def __init__(self, job_model: nn.Module, multi_hot: list[int]) -> None:
        super().__init__()
        self.multi_hot = multi_hot
        self.bottom, self.top = job_model.bottom, job_model.top  # replaced by copies below
        self.tables = nn.ModuleList(nn.EmbeddingBag(t.num_embeddings, t.embedding_dim, mode="sum")
                                    for t in job_model.tables.tables())
        self.cross = job_model.cross
        self.load_state_dict({k: v.clone() for k, v in job_model.state_dict().items()}, assign=True)

    def forward(self, dense: torch.Tensor, ids: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
        x0 = torch.cat([self.bottom(dense)] + [t(i, o) for t, i, o in zip(self.tables, ids, offsets)], dim=1)
        x = x0
        for v, w in zip(self.cross.V, self.cross.W):
            x = x0 * w(v(x)) + x
        return self.top(x).squeeze(1)


def jagged(batch: dict, multi_hot: list[int]) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """The batch as a KeyedJaggedTensor-fed loop sees it: per table a flat id list and bag offsets."""
    columns = batch["sparse"].split(multi_hot, dim=1)
    n = len(batch["labels"])
    return (batch["dense"], [c.reshape(-1) for c in columns],
            [torch.arange(0, n * m, m) for m in multi_hot], batch["labels"])


def plain_step(job, precision: str, batches, multi_hot: list[int], lr: float):
    model = PlainDlrm(copy.deepcopy(job.model), multi_hot)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=lr, eps=1e-8)
    autocast, loss_fn = autocast_for(precision), nn.BCEWithLogitsLoss()
    feeds = [jagged(b, multi_hot) for b in batches]

    def step(s: int) -> None:
        dense, ids, offsets, labels = feeds[s]
        with autocast():
            logits = model(dense, ids, offsets)
        loss_fn(logits.float(), labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def main() -> None:
    args = harness.parser(__doc__, member="dlrm-mini", steps=20).parse_args()
    bench = harness.Bench.build(args.member)
    spec = bench.spec
    multi_hot = list(spec.shape.multi_hot)
    gbs = spec.global_batch_size
    bench.header(args.steps, f"{gbs} samples per step ({sum(multi_hot)} ids each)")
    for i, precision in enumerate(("fp32", "bf16")):
        if i:
            bench = bench.rebuild()
        print(f"  loader alone: {harness.loader_rate(bench, args.steps):10,.0f} samples/s (memory-mapped day files, hashed ids)")
        batches = bench.batches(args.steps + 1)  # the loop's own batches, for both loops
        plain = plain_step(bench.job, precision, batches, multi_hot, spec.learning_rate)  # copies the start weights
        harness.compare({"trainclock": bench.step(batches, precision), "plain": plain}, bench, args.steps,
                        label=f"{precision:4}")


if __name__ == "__main__":
    main()
