"""An exponential moving average of a module's trainable weights, from the weights it starts with,
updated after every optimizer step (`followed`). With `warmup`, as the latent-diffusion reference keeps
one when its config sets use_ema (ldm/modules/ema.py LitEma): decay min(decay, (1 + n) / (10 + n)) at
update n, so the average follows the weights closely at first; without, the decay from the first
update, as the RNN-T reference's (common/optimizers.py AdamW/Lamb ema). Its shadows are buffers of
the module that owns it, so checkpoints and model snapshots carry them; `swapped` puts them in place
of the weights for an evaluation and puts the weights back after (the reference's ema_scope).

Hand-written rather than torch.optim.swa_utils.AveragedModel: that one deep-copies the module it
averages (a second model to wrap, checkpoint and snapshot) and has no LitEma warm-up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class WeightAverage(nn.Module):
    def __init__(self, module: nn.Module, decay: float, warmup: bool = True) -> None:
        super().__init__()
        if not 0.0 < decay < 1.0:
            raise ValueError(f"a weight average's decay must lie in (0, 1), not {decay}")
        self.decay = decay
        self.warmup = warmup
        # the averaged module is held outside the module tree: registered, its weights would be saved twice
        self.__dict__["averaged"] = module
        self.names = [name for name, p in module.named_parameters() if p.requires_grad]
        # on the device, so an update never reads a count back to the host
        self.register_buffer("updates", torch.zeros((), dtype=torch.float32, device=self._weights()[0].device))
        for name, p in zip(self.names, self._weights()):
            self.register_buffer(self._shadow_name(name), p.detach().clone())

    @staticmethod
    def _shadow_name(name: str) -> str:
        return "shadow_" + name.replace(".", "_")  # a buffer's name holds no dots

    def _weights(self) -> list[torch.Tensor]:
        params = dict(self.averaged.named_parameters())
        return [params[name] for name in self.names]

    def _shadows(self) -> list[torch.Tensor]:
        return [getattr(self, self._shadow_name(name)) for name in self.names]

    @torch.no_grad()
    def update(self) -> None:
        """One step of the average towards the current weights (after an optimizer step)."""
        self.updates += 1
        decay = torch.clamp((1 + self.updates) / (10 + self.updates), max=self.decay) if self.warmup else self.decay
        shadows = self._shadows()
        # shadow += (weight - shadow) * (1 - decay): lerp takes its weight as a host number (a read of
        # the device), a multiply takes a device tensor
        steps = torch._foreach_sub(self._weights(), shadows)
        torch._foreach_mul_(steps, 1 - decay)
        torch._foreach_add_(shadows, steps)

    @contextlib.contextmanager
    def swapped(self) -> Iterator[None]:
        """The averaged weights in the module for the while, its own weights back after."""
        weights = self._weights()
        with torch.no_grad():
            kept = [w.detach().clone() for w in weights]
            torch._foreach_copy_(weights, self._shadows())
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(weights, kept)


def average_buffers(model: nn.Module) -> list[str]:
    """The names of every weight average's buffers in `model`: each rank updates its own average from
    the same weights, so data parallelism must not broadcast them (DDP would send a copy of the model
    from rank 0 before every forward)."""
    return [f"{prefix}.{name}" if prefix else name for prefix, m in model.named_modules()
            if isinstance(m, WeightAverage) for name, _ in m.named_buffers()]


def average_of(model: nn.Module) -> WeightAverage | None:
    """The weight average `model` keeps (as a submodule; under DDP or torch.compile too), if any."""
    return next((m for m in model.modules() if isinstance(m, WeightAverage)), None)


def averaged(model: nn.Module) -> contextlib.AbstractContextManager:
    """`model` with its weight average in place of its weights for the while, where it keeps one:
    what an evaluation scores (the references' ema_scope)."""
    average = average_of(model)
    return average.swapped() if average is not None else contextlib.nullcontext()


def followed(model: nn.Module, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """`optimizer`, updating `model`'s weight average (if it keeps one) after every step it takes, as
    the references update theirs after each batch (on_train_batch_end, apply_ema)."""
    average = average_of(model)
    if average is not None:
        optimizer.register_step_post_hook(lambda *_: average.update())
    return optimizer

