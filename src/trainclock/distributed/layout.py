"""The parallel layout of a run: pipeline x data x tensor parallel, over a DeviceMesh. The same
type describes what `trainclock run` trains and what `trainclock plan` predicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainclock.errors import UsageError

if TYPE_CHECKING:  # torch stays out of the CLI's startup, which validates layouts
    from torch.distributed.device_mesh import DeviceMesh

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")  # torch.distributed.pipelining's schedules trainclock runs
MESH_DIMS = ("pp", "dp", "tp")  # slowest to fastest: ranks of a tensor-parallel group are neighbours


@dataclass(frozen=True)
class Layout:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    fsdp: bool = False  # shard the data-parallel dimension with FSDP2 instead of replicating it with DDP
    pp_schedule: str = "1f1b"  # how micro-batches move through the pipeline stages (pp > 1)
    vp: int = 1  # pipeline stages per pipeline rank (virtual stages; > 1 with the interleaved schedule)
    # the run's matmul precision, "bf16" or "fp32", set once the run has resolved it: FSDP2 all-gathers a
    # bf16 run's parameters in bf16 (distributed.parallelize.mixed_precision)
    precision: str = "fp32"

    @classmethod
    def for_world(cls, world_size: int, tp: int = 1, pp: int = 1, dp: int | None = None, fsdp: bool = False,
                  pp_schedule: str | None = None, vp: int | None = None) -> "Layout":
        for flag, value in (("--tp", tp), ("--pp", pp), ("--dp", dp), ("--vp", vp)):
            if value is not None and value < 1:
                raise UsageError(f"{flag} must be at least 1, got {value}")
        if pp == 1 and (pp_schedule is not None or vp is not None):
            raise UsageError("--pp-schedule and --vp apply to pipeline-parallel runs; add --pp 2 or more")
        pp_schedule = pp_schedule or ("interleaved-1f1b" if vp is not None and vp > 1 else "1f1b")
        if pp_schedule not in PP_SCHEDULES:
            raise UsageError(f"unknown pipeline schedule {pp_schedule!r}; choose one of {', '.join(PP_SCHEDULES)}")
        interleaved = pp_schedule == "interleaved-1f1b"
        vp = vp if vp is not None else (2 if interleaved else 1)
        if interleaved != (vp > 1):
            raise UsageError(f"--vp {vp} does not go with the {pp_schedule} schedule: the interleaved-1f1b schedule "
                             "runs 2 or more stages per pipeline rank, the others 1")
        if world_size % (tp * pp):
            raise UsageError(f"{world_size} processes cannot be split into tp={tp} x pp={pp}; make the process count a multiple of {tp * pp}")
        implied = world_size // (tp * pp)
        if dp is not None and dp != implied:
            raise UsageError(f"--dp {dp} does not match {world_size} processes / (tp={tp} x pp={pp}) = {implied}")
        return cls(dp=implied, tp=tp, pp=pp, fsdp=fsdp, pp_schedule=pp_schedule, vp=vp)

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    def describe(self) -> str:
        text = f"dp={self.dp} ({'fsdp' if self.fsdp else 'ddp'}) tp={self.tp} pp={self.pp}"
        if self.pp > 1:
            text += f" ({self.pp_schedule}{f', vp={self.vp}' if self.vp > 1 else ''})"
        return text

    def group(self, dim: str) -> tuple[int, int]:
        """(rank stride, size) of a communication group along `dim` ("tp", "dp" or "pp") in the
        mesh's rank order: a group spans nodes when stride x size exceeds a node."""
        sizes = {"pp": self.pp, "dp": self.dp, "tp": self.tp}
        faster = MESH_DIMS[MESH_DIMS.index(dim) + 1:]
        stride = 1
        for d in faster:
            stride *= sizes[d]
        return stride, sizes[dim]

    def run_flags(self, gpus_per_node: int) -> list[str]:
        """The `trainclock run` flags that rebuild this layout (Layout.for_world of what they
        parse to gives it back). torchrun starts the same number of processes on every node: as
        many as fit in a node of `gpus_per_node` and divide the world evenly."""
        if gpus_per_node < 1:
            raise UsageError(f"a node holds at least 1 accelerator, got {gpus_per_node}")
        world = self.world_size
        nproc = max(n for n in range(1, min(gpus_per_node, world) + 1) if world % n == 0)
        flags = ["--nproc", str(nproc), "--nnodes", str(world // nproc)]
        if self.tp > 1:
            flags += ["--tp", str(self.tp)]
        if self.pp > 1:
            flags += ["--pp", str(self.pp)]
            if self.vp > 1:
                flags += ["--vp", str(self.vp)]  # implies the interleaved schedule
            if self.pp_schedule != ("interleaved-1f1b" if self.vp > 1 else "1f1b"):
                flags += ["--pp-schedule", self.pp_schedule]
        if self.fsdp:
            flags.append("--fsdp")
        return flags

    def mesh(self, device_type: str) -> "DeviceMesh":
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(device_type, (self.pp, self.dp, self.tp), mesh_dim_names=MESH_DIMS)
