"""The parallel layout of a run: pipeline x data x tensor parallel, over a DeviceMesh."""

from __future__ import annotations

from dataclasses import dataclass

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from trainclock.errors import UsageError


@dataclass(frozen=True)
class Layout:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    fsdp: bool = False  # shard the data-parallel dimension with FSDP2 instead of replicating it with DDP

    @classmethod
    def for_world(cls, world_size: int, tp: int = 1, pp: int = 1, dp: int | None = None, fsdp: bool = False) -> "Layout":
        for flag, value in (("--tp", tp), ("--pp", pp), ("--dp", dp)):
            if value is not None and value < 1:
                raise UsageError(f"{flag} must be at least 1, got {value}")
        if world_size % (tp * pp):
            raise UsageError(f"{world_size} processes cannot be split into tp={tp} x pp={pp}; make the process count a multiple of {tp * pp}")
        implied = world_size // (tp * pp)
        if dp is not None and dp != implied:
            raise UsageError(f"--dp {dp} does not match {world_size} processes / (tp={tp} x pp={pp}) = {implied}")
        return cls(dp=implied, tp=tp, pp=pp, fsdp=fsdp)

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    def describe(self) -> str:
        return f"dp={self.dp} ({'fsdp' if self.fsdp else 'ddp'}) tp={self.tp} pp={self.pp}"

    def mesh(self, device_type: str) -> DeviceMesh:
        return init_device_mesh(device_type, (self.pp, self.dp, self.tp), mesh_dim_names=("pp", "dp", "tp"))
