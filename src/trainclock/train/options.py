"""How a run trains, beyond what its workload decides: device, precision, limits, checkpoint and
read cadence, profiling. The loop (train.loop) and the step (train.step) read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class TrainOptions:
    device: torch.device
    precision: str = "auto"  # "bf16" (autocast), "fp32", or "auto": bf16 where it is faster (device.peak)
    max_seconds: float | None = None  # wall-clock limit on the timed region
    max_samples: int | None = None  # overrides the workload's limit
    checkpoint_every_steps: int = 0  # with a checkpointer: save every N optimizer steps (0: never)
    full_curve: bool = False  # reference runs that fix a target: train the whole budget, never stop at one
    profile_steps: int = 0  # with profile_trace: torch.profiler over this many steps (train.profile)
    profile_trace: Path | None = None
    # steps between host reads of the losses (and of the time limit): a read waits for the device to
    # finish, so a GPU's queue runs dry at every one; losses are kept per step on the device meanwhile
    log_every_steps: int = 10
    prefetch_steps: int | None = None  # batches built ahead on a thread (None: prefetch.default_depth of the device)
