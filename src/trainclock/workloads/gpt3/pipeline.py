"""Pipeline parallel GPT with torch.distributed.pipelining: each pipeline rank holds a
contiguous run of blocks (the first also the embeddings, the last the final LayerNorm and the
output head), and a GPipe schedule moves micro-batches through them. With several data-parallel
replicas, each stage is wrapped in DDP or sharded with FSDP2 over the data-parallel mesh (the
pipelining stage drives both: gradients are reduced once, after the last micro-batch).

The output head is tied to the input embedding, which lives on the first stage: the last stage
keeps its own copy and the two gradients are summed after every backward (Megatron's way), so
both copies take identical optimizer steps and stay equal."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from trainclock.dist.context import ParallelContext
from trainclock.dist.grads import grad_norm
from trainclock.workloads.gpt3.model import GPT


class GPTStage(nn.Module):
    def __init__(self, model: GPT, first: int, last: int, is_first: bool, is_last: bool) -> None:
        super().__init__()
        self.is_first, self.is_last = is_first, is_last
        # Keys keep the blocks' indices in the whole model, so checkpoint names are the same on every layout.
        self.blocks = nn.ModuleDict({str(i): model.blocks[i] for i in range(first, last)})
        if is_first:
            self.tok_emb, self.pos_emb = model.tok_emb, model.pos_emb
        if is_last:
            self.ln_f = model.ln_f
            self.head = nn.Parameter(model.tok_emb.weight.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.is_first:
            x = self.tok_emb(x) + self.pos_emb(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks.values():
            x = block(x)
        if self.is_last:
            x = F.linear(self.ln_f(x), self.head)
        return x


def _loss(logits_BTV: torch.Tensor, targets_BT: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits_BTV.flatten(0, 1).float(), targets_BT.flatten())


class PipelinedGPT(nn.Module):
    """This rank's stage, with the step, evaluation and clipping the loop asks of a pipeline."""

    def __init__(self, model: GPT, ctx: ParallelContext, device: torch.device, microbatches: int) -> None:
        super().__init__()
        pp_mesh = ctx.mesh["pp"]
        self.pp_group = pp_mesh.get_group()
        self.rank, self.size = pp_mesh.get_local_rank(), ctx.layout.pp
        self.width = model.shape.d_model
        layers = model.shape.n_layer
        first, last = self.rank * layers // self.size, (self.rank + 1) * layers // self.size
        self.stage_module = GPTStage(model, first, last, self.rank == 0, self.rank == self.size - 1)
        # the DDP wrapper is kept off this module's attributes: parameter names stay stage_module.*
        runnable = _data_parallel(self.stage_module, ctx)
        self.stage = PipelineStage(runnable, self.rank, self.size, device, group=self.pp_group)
        self.schedule = ScheduleGPipe(self.stage, n_microbatches=microbatches, loss_fn=_loss)
        self.tied_group = _tied_embedding_group(ctx)

    @property
    def is_first(self) -> bool:
        return self.rank == 0

    @property
    def is_last(self) -> bool:
        return self.rank == self.size - 1

    def pipeline_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Forward and backward of this rank's batch through all stages; the mean loss (every
        pipeline rank gets it)."""
        losses: list[torch.Tensor] = []
        if self.is_first:
            self.schedule.step(x, target=y if self.is_last else None, losses=losses)
        elif self.is_last:
            self.schedule.step(target=y, losses=losses)
        else:
            self.schedule.step()
        self._sum_tied_gradients()
        return self._share_loss(losses)

    def pipeline_eval(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Forward only, one micro-batch at a time, passing activations rank to rank (the GPipe
        schedule is built for the training micro-batch count; evaluation batches vary)."""
        ranks = dist.get_process_group_ranks(self.pp_group)
        with torch.no_grad():
            if self.is_first:
                h = self.stage_module(x)
            else:
                h = torch.empty(len(x), x.shape[1], self.width, device=x.device)
                dist.recv(h, src=ranks[self.rank - 1], group=self.pp_group)
                h = self.stage_module(h)
            if not self.is_last:
                dist.send(h.float().contiguous(), dst=ranks[self.rank + 1], group=self.pp_group)
                return self._share_loss([])
            return self._share_loss([_loss(h, y)])

    def _share_loss(self, losses: list[torch.Tensor]) -> torch.Tensor:
        mean = torch.stack([l.detach().float() for l in losses]).mean() if losses else torch.zeros(())
        dist.all_reduce(mean, group=self.pp_group)  # only the last stage contributes
        return mean

    def _sum_tied_gradients(self) -> None:
        if self.tied_group is None:
            return
        weight = self.stage_module.tok_emb.weight if self.is_first else self.stage_module.head
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        # under FSDP both copies are sharded alike over the data-parallel mesh: sum shard with shard
        grad = weight.grad.to_local() if isinstance(weight.grad, DTensor) else weight.grad
        dist.all_reduce(grad, group=self.tied_group)

    def grad_square_sum(self) -> torch.Tensor:
        """Squared gradient norm of the whole model: each stage's share (whole across its data-parallel
        shards), the tied copy once."""
        params = [p for name, p in self.stage_module.named_parameters() if name != "head"]
        local = grad_norm(params).float().pow(2)
        dist.all_reduce(local, group=self.pp_group)
        return local


def _data_parallel(stage: GPTStage, ctx: ParallelContext) -> nn.Module:
    if ctx.layout.dp == 1:
        return stage
    dp_mesh = ctx.mesh["dp"]
    if ctx.layout.fsdp:
        for block in stage.blocks.values():
            fully_shard(block, mesh=dp_mesh)
        fully_shard(stage, mesh=dp_mesh)
        return stage
    return DistributedDataParallel(stage, process_group=dp_mesh.get_group())


def _tied_embedding_group(ctx: ParallelContext):
    """A group of the first and last pipeline ranks at each (dp, tp) position; every rank
    must create every group, in the same order."""
    mesh = ctx.mesh.mesh  # ranks laid out as (pp, dp, tp)
    mine = None
    for d in range(mesh.shape[1]):
        for t in range(mesh.shape[2]):
            ranks = [int(mesh[0, d, t]), int(mesh[-1, d, t])]
            group = dist.new_group(ranks)
            if ctx.env.rank in ranks:
                mine = group
    return mine if ctx.layout.pp > 1 else None
