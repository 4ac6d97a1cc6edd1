"""Pipeline parallel GPT with torch.distributed.pipelining. The blocks are cut into pp x vp
consecutive stages (the first also holds the embeddings, the last the final LayerNorm and the
output head); pipeline rank r holds stages r, r + pp, r + 2pp, ... (vp of them: vp > 1 is
Megatron's interleaved schedule, which shrinks the bubble by vp). A schedule (GPipe, 1F1B or
interleaved 1F1B) moves micro-batches through them. With several data-parallel replicas, each
stage is wrapped in DDP or sharded with FSDP2 over the data-parallel mesh (the pipelining stage
drives both: gradients are reduced once, after the last micro-batch).

The output head is tied to the input embedding, which lives on the first stage: the last stage
keeps its own copy and the two gradients are summed after every backward (Megatron's way), so
both copies take identical optimizer steps and stay equal."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from trainclock.distributed import collectives
from trainclock.distributed.context import ParallelContext
from trainclock.distributed.grads import grad_norm
from trainclock.distributed.local_shards import local_part
from trainclock.distributed.parallelize import Materialize, data_parallel_stage
from trainclock.distributed.pipeline import PipelineModel, schedule_class
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


class PipelinedGPT(PipelineModel):
    """This rank's stages, with the step, evaluation and clipping the loop asks of a pipeline."""

    def __init__(self, model: GPT, ctx: ParallelContext, device: torch.device, microbatches: int,
                 materialize: Materialize | None = None) -> None:
        super().__init__()
        layout = ctx.layout
        pp_mesh = ctx.mesh["pp"]
        self.pp_group = pp_mesh.get_group()
        self.rank, self.size = pp_mesh.get_local_rank(), layout.pp
        self.device = device
        self.width = model.shape.d_model
        layers, n_stages = model.shape.n_layer, layout.pp * layout.vp
        self.stage_indices = list(range(self.rank, n_stages, layout.pp))
        self.n_stages = n_stages
        # stage modules are kept off this module's attributes: see _register_parameters_of
        self._stages = [GPTStage(model, s * layers // n_stages, (s + 1) * layers // n_stages, s == 0, s == n_stages - 1)
                        for s in self.stage_indices]
        runnables = [data_parallel_stage(stage, ctx, stage.blocks.values(), materialize) for stage in self._stages]
        self._runnables = runnables  # a plain list: the stages' parameters are registered below, once
        self._register_parameters_of(self._stages)
        self.tied_group = _tied_embedding_group(ctx)
        if materialize is not None and materialize.gives_values:  # the head was copied from the meta device
            self._copy_embedding_to_head()
        # imported when a pipeline is cut: torch.distributed.pipelining imports torch._dynamo, and the
        # registry imports this module (through the workload) for every command
        from torch.distributed.pipelining import PipelineStage

        pipeline_stages = [PipelineStage(r, s, n_stages, device, group=self.pp_group)
                           for r, s in zip(runnables, self.stage_indices)]
        schedule = schedule_class(layout.pp_schedule)
        self.schedule = schedule(pipeline_stages if layout.vp > 1 else pipeline_stages[0],
                                 n_microbatches=microbatches, loss_fn=_loss)

    def _register_parameters_of(self, stages: list[GPTStage]) -> None:
        """This rank's parameters under the whole model's names (blocks.<i>.*, tok_emb.*, ...),
        whatever the layout and schedule, so a checkpoint resumes with or without a pipeline.
        Called after the stages are sharded: it holds their (possibly DTensor) parameters."""
        self.blocks = nn.ModuleDict({key: block for stage in stages for key, block in stage.blocks.items()})
        for stage in stages:
            if stage.is_first:
                self.tok_emb, self.pos_emb = stage.tok_emb, stage.pos_emb
            if stage.is_last:
                self.ln_f, self.head = stage.ln_f, stage.head

    @property
    def checkpoint_aliases(self) -> dict[str, str]:
        """The last stage's copy of the tied embedding is checkpointed as the embedding itself
        (the two stay equal), so checkpoints look like an unpipelined model's."""
        return {"head": "tok_emb.weight"} if self.is_last else {}

    @property
    def is_first(self) -> bool:
        return self.rank == 0

    @property
    def is_last(self) -> bool:
        return self.rank == self.size - 1

    def step(self, batch: Any) -> torch.Tensor:
        x, y = batch
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
        """Forward only, passing activations from stage to stage in order (the training schedule
        is built for its micro-batch count; evaluation batches vary)."""
        ranks = dist.get_process_group_ranks(self.pp_group)
        losses: list[torch.Tensor] = []
        h = x
        with torch.no_grad():
            for index, stage in zip(self.stage_indices, self._stages):
                if index > 0:
                    h = torch.empty(len(x), x.shape[1], self.width, device=x.device)
                    collectives.recv(h, src=ranks[(index - 1) % self.size], group=self.pp_group)
                h = stage(h)
                if index < self.n_stages - 1:
                    collectives.send(h.float().contiguous(), dst=ranks[(index + 1) % self.size], group=self.pp_group)
                else:
                    losses.append(_loss(h, y))
        return self._share_loss(losses)

    def _share_loss(self, losses: list[torch.Tensor]) -> torch.Tensor:
        # only the last stage contributes; the others' zero is made where the model is (NCCL refuses a CPU one)
        mean = torch.stack([l.detach().float() for l in losses]).mean() if losses else torch.zeros((), device=self.device)
        return collectives.all_reduce(mean, group=self.pp_group)

    def _sum_tied_gradients(self) -> None:
        if self.tied_group is None:
            return
        weight = self.tok_emb.weight if self.is_first else self.head
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        # under FSDP both copies are sharded alike over the data-parallel mesh: sum shard with shard
        grad = local_part(weight.grad)
        collectives.all_reduce_(grad, group=self.tied_group)

    def forward_stages(self, x_BT: torch.Tensor) -> list[torch.Tensor]:
        """One micro-batch forward through every stage this rank holds, each from an input of the
        shape it receives (the tokens on the first stage, made-up hidden states on the others), as
        one sum per stage to run backward from: what a micro-batch leaves on this rank, for the dry
        run to measure. Training goes through step."""
        sums = []
        for index, runnable in zip(self.stage_indices, self._runnables):
            x = x_BT if index == 0 else torch.randn(*x_BT.shape, self.width, device=x_BT.device, requires_grad=True)
            sums.append(runnable(x).float().sum())
        return sums

    def _copy_embedding_to_head(self) -> None:
        """The last stage's copy of the tied embedding takes the first stage's values: the head
        is zeroed and the two summed over the tied group (under FSDP, shard with shard)."""
        if self.tied_group is None:
            return
        weight = self.tok_emb.weight if self.is_first else self.head
        local = local_part(weight)
        with torch.no_grad():
            if not self.is_first:
                local.zero_()
            collectives.all_reduce_(local, group=self.tied_group)

    def grad_square_sum(self) -> torch.Tensor:
        """Squared gradient norm of the whole model: each stage's share (whole across its data-parallel
        shards), the tied copy once."""
        params = [p for name, p in self.named_parameters() if name != "head"]
        return collectives.all_reduce(grad_norm(params).float().pow(2), group=self.pp_group)


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
