"""LoRA (Hu et al. 2021) as the reference applies it through peft: every target linear layer keeps
its frozen weight W and gains a trainable low-rank update, y = W x + (alpha / r) * B A dropout(x),
with A (r x in) drawn like a Kaiming-uniform linear weight and B (out x r) zero, so training starts
from exactly the pretrained model. Everything but the adapters is frozen.

Hand-written rather than peft's (0.21.2 on the index): peft would add itself and accelerate to the
install for these 40 lines, and its PeftModel wrapper renames every parameter (base_model.model....),
which the checkpoint loader and FSDP2's block list would then have to follow; these lines build on
the meta device like the rest of the model. (peft itself was not tried here.)"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LoraConfig:
    rank: int  # r
    alpha: float  # the update is scaled by alpha / r
    dropout: float  # on the adapter's input only, in training
    target_modules: tuple[str, ...]  # names of the linear layers that get adapters (peft's target_modules)

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


class LoraLinear(nn.Module):
    """A frozen nn.Linear plus its low-rank update. The base layer is kept as a child named
    `base_layer`, as peft names it, so a checkpoint's `...qkv_proj.weight` maps to
    `...qkv_proj.base_layer.weight` (see checkpoint.py)."""

    def __init__(self, base_layer: nn.Linear, config: LoraConfig) -> None:
        super().__init__()
        self.base_layer = base_layer
        self.base_layer.requires_grad_(False)
        device = base_layer.weight.device
        self.lora_A = nn.Linear(base_layer.in_features, config.rank, bias=False, device=device)
        self.lora_B = nn.Linear(config.rank, base_layer.out_features, bias=False, device=device)
        self.dropout = nn.Dropout(config.dropout)
        self.scaling = config.scaling
        self.reset_adapter()

    def reset_adapter(self) -> None:
        """peft's default initialisation: A as nn.Linear's (Kaiming uniform, a=sqrt(5)), B zero."""
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(self.dropout(x))) * self.scaling


def add_lora(model: nn.Module, config: LoraConfig) -> list[str]:
    """Freeze every parameter of `model`, then replace each nn.Linear whose own name is in
    config.target_modules by a LoraLinear around it (in place). Returns the names replaced."""
    model.requires_grad_(False)
    replaced = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if child_name in config.target_modules and isinstance(child, nn.Linear):
                setattr(module, child_name, LoraLinear(child, config))
                replaced.append(f"{name}.{child_name}" if name else child_name)
    if not replaced:
        raise ValueError(f"no linear layer named {', '.join(config.target_modules)} to adapt")
    return replaced


def lora_parameter_count(in_out: Sequence[tuple[int, int]], rank: int) -> int:
    """Trainable parameters of adapters on linear layers of these (in, out) widths: r * (in + out) each."""
    return sum(rank * (i + o) for i, o in in_out)


def trainable_parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
