"""An exponential moving average of a module's trainable weights, as the latent-diffusion reference
keeps one when its config sets use_ema (ldm/modules/ema.py LitEma): decay min(decay, (1 + n) / (10 + n))
at update n, so the average follows the weights closely at first. Its shadows are buffers of the
module that owns it, so checkpoints and model snapshots carry them; `swapped` puts them in place of
the weights for an evaluation and puts the weights back after (the reference's ema_scope).

Hand-written rather than torch.optim.swa_utils.AveragedModel: that one deep-copies the module it
averages (a second model to wrap, checkpoint and snapshot) and has no LitEma warm-up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class WeightAverage(nn.Module):
    def __init__(self, module: nn.Module, decay: float) -> None:
        super().__init__()
        if not 0.0 < decay < 1.0:
            raise ValueError(f"a weight average's decay must lie in (0, 1), not {decay}")
        self.decay = decay
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
        decay = torch.clamp((1 + self.updates) / (10 + self.updates), max=self.decay)
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
