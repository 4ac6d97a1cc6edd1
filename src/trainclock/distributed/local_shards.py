"""Parameters of which a rank holds a block of rows as a plain tensor (a row-wise embedding table's
part), and how state dicts show them whole.

Plain, not DTensor: autograd gives a plain tensor a sparse gradient (only the rows looked up),
while a DTensor's gradient must be a DTensor, which has no sparse form. State dicts (the module's
and the optimizer's) present such a parameter, and every optimizer state of its shape, as the
DTensor of the whole tensor (Shard(0), torch.chunk's split, sharing this rank's storage), so
torch.distributed.checkpoint writes each rank's rows and loads them back at any world size and
from any layout; loading takes this rank's rows of whatever it is given."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

if TYPE_CHECKING:
    from torch.distributed.tensor import DTensor

ATTRIBUTE = "trainclock_row_block"
# a plain parameter that one rank of a group holds alone (a table-wise embedding table) carries its
# group under this attribute: grads.py sums its squared gradient norm over that group
SHARD_GROUP = "trainclock_shard_group"


@dataclass(frozen=True)
class RowBlock:
    """Rows [first, first + local rows) of a tensor of `rows` rows split over a 1-D mesh."""

    mesh: DeviceMesh
    rows: int
    first: int

    def whole(self, local: torch.Tensor) -> DTensor:
        # imported here: torch.distributed.tensor brings torch._dynamo (1 s), which every trainclock
        # command would pay through the registry
        from torch.distributed.tensor import DTensor, Shard

        shape = (self.rows, *local.shape[1:])
        stride = torch.empty(shape, device="meta").stride()  # the whole tensor's, contiguous
        return DTensor.from_local(local.detach(), self.mesh, [Shard(0)], run_check=False, shape=shape, stride=stride)

    def local(self, value: torch.Tensor, rows_here: int) -> torch.Tensor:
        """This rank's rows of a loaded value: a DTensor's local part (DCP loaded it into our
        shards), or the slice of a whole tensor."""
        if is_dtensor(value):
            return value.to_local()
        return value[self.first:self.first + rows_here]


def is_dtensor(t: object) -> bool:
    """Whether `t` is a DTensor (a sharded or replicated tensor over a device mesh)."""
    # never imported here: torch.distributed.tensor takes half a second to import, which every
    # trainclock command would pay, and no tensor is a DTensor before something has imported it
    dtensor = sys.modules.get("torch.distributed.tensor")
    return dtensor is not None and isinstance(t, dtensor.DTensor)


def local_part(t: torch.Tensor) -> torch.Tensor:
    """This rank's part of `t`: a DTensor's local shard, or `t` itself."""
    return t.to_local() if is_dtensor(t) else t


def mark(param: nn.Parameter, block: RowBlock) -> None:
    setattr(param, ATTRIBUTE, block)


def block_of(param: torch.Tensor) -> RowBlock | None:
    return getattr(param, ATTRIBUTE, None)


def present_module_state(module: nn.Module) -> None:
    """Make `module`'s state dict show its marked parameters whole, and load them from any form."""

    def marked(prefix: str):
        return [(prefix + name, p, block_of(p)) for name, p in module.named_parameters() if block_of(p) is not None]

    def save(_module, state: dict, prefix: str, _metadata) -> None:
        for key, p, block in marked(prefix):
            if key in state:
                state[key] = block.whole(state[key])

    def load(_module, state: dict, prefix: str, *_args) -> None:
        for key, p, block in marked(prefix):
            if key in state:
                state[key] = block.local(state[key], p.shape[0])

    module.register_state_dict_post_hook(save)
    module.register_load_state_dict_pre_hook(load)


def present_optimizer_state(optimizer: torch.optim.Optimizer) -> None:
    """Make `optimizer`'s state dict show the state of its marked parameters (tensors of the
    parameter's shape: Adagrad's sum, Adam's moments) whole, and load them from any form."""

    def params() -> list[torch.Tensor]:
        return [p for group in optimizer.param_groups for p in group["params"]]

    def convert(state_dict: dict, saving: bool) -> dict:
        states = state_dict["state"]
        for index, p in enumerate(params()):
            block = block_of(p)
            if block is None or index not in states:
                continue
            # a new dict: the packed state shares its dicts with the optimizer's own
            states[index] = {k: (block.whole(v) if saving else block.local(v, p.shape[0]))
                             if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[1:] == p.shape[1:] else v
                             for k, v in states[index].items()}
        return state_dict

    if any(block_of(p) is not None for p in params()):
        optimizer.register_state_dict_post_hook(lambda _opt, state_dict: convert(state_dict, saving=True))
        optimizer.register_load_state_dict_pre_hook(lambda _opt, state_dict: convert(state_dict, saving=False))
