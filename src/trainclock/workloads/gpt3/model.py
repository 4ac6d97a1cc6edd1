"""The GPT-3 architecture in one file: decoder-only, pre-LayerNorm, GELU MLP of 4x width,
learned positions, tied input/output embeddings, causal attention through SDPA.

Kept free of parallelism, precision and optimizer concerns (those live in train/ and distributed/).
Tensor names carry their shape: B batch, T time, D model width, H heads, K head width, V vocab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTShape:
    n_layer: int
    d_model: int
    n_head: int
    context: int
    vocab_size: int

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")

    @property
    def d_ffn(self) -> int:
        return 4 * self.d_model

    def parameter_count(self, include_positions: bool = True) -> int:
        """Exact count of the model's parameters, computed without building it."""
        d = self.d_model
        per_layer = (
            2 * 2 * d  # two LayerNorms (weight + bias)
            + 3 * d * d + 3 * d  # qkv projection
            + d * d + d  # attention output projection
            + d * self.d_ffn + self.d_ffn  # MLP up
            + self.d_ffn * d + d  # MLP down
        )
        embeddings = self.vocab_size * d + (self.context * d if include_positions else 0)
        return self.n_layer * per_layer + embeddings + 2 * d  # final LayerNorm

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token: 6N for the matmuls (forward + backward) plus attention
        scores and weighted sum, 12*L*D*T (the nanoGPT/PaLM estimate)."""
        t = seq_len or self.context
        return 6 * self.parameter_count(include_positions=False) + 12 * self.n_layer * self.d_model * t


class CausalSelfAttention(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.head_dim = shape.d_model // shape.n_head
        # qkv rows are grouped by head ([q_h; k_h; v_h] for each head h, Megatron's layout), so a
        # column-parallel split of this one matmul gives each tensor-parallel rank whole heads.
        self.qkv = nn.Linear(shape.d_model, 3 * shape.d_model)
        self.proj = nn.Linear(shape.d_model, shape.d_model)

    def forward(self, x_BTD: torch.Tensor) -> torch.Tensor:
        B, T, _ = x_BTD.shape
        qkv_BTH3K = self.qkv(x_BTD).view(B, T, -1, 3, self.head_dim)  # H: the heads on this rank
        q_BHTK, k_BHTK, v_BHTK = qkv_BTH3K.permute(3, 0, 2, 1, 4).unbind(0)
        y_BHTK = F.scaled_dot_product_attention(q_BHTK, k_BHTK, v_BHTK, is_causal=True)
        return self.proj(y_BHTK.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.up = nn.Linear(shape.d_model, shape.d_ffn)
        self.down = nn.Linear(shape.d_ffn, shape.d_model)

    def forward(self, x_BTD: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x_BTD), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(shape.d_model)
        self.attn = CausalSelfAttention(shape)
        self.ln_mlp = nn.LayerNorm(shape.d_model)
        self.mlp = MLP(shape)

    def forward(self, x_BTD: torch.Tensor) -> torch.Tensor:
        x_BTD = x_BTD + self.attn(self.ln_attn(x_BTD))
        return x_BTD + self.mlp(self.ln_mlp(x_BTD))


class GPT(nn.Module):
    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.shape = shape
        self.tok_emb = nn.Embedding(shape.vocab_size, shape.d_model)
        self.pos_emb = nn.Embedding(shape.context, shape.d_model)
        self.blocks = nn.ModuleList(Block(shape) for _ in range(shape.n_layer))
        self.ln_f = nn.LayerNorm(shape.d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init_weights(self, self.shape.n_layer)

    def forward(self, idx_BT: torch.Tensor, targets_BT: torch.Tensor | None = None) -> torch.Tensor:
        """Logits when no targets are given, otherwise the mean cross-entropy in nats/token."""
        T = idx_BT.shape[1]
        if T > self.shape.context:
            raise ValueError(f"sequence length {T} exceeds the model context {self.shape.context}")
        pos_T = torch.arange(T, device=idx_BT.device)
        x_BTD = self.tok_emb(idx_BT) + self.pos_emb(pos_T)
        for block in self.blocks:
            x_BTD = block(x_BTD)
        logits_BTV = F.linear(self.ln_f(x_BTD), self.tok_emb.weight)  # tied output embedding
        if targets_BT is None:
            return logits_BTV
        return F.cross_entropy(logits_BTV.flatten(0, 1).float(), targets_BT.flatten())


def init_weights(module: nn.Module, n_layer: int) -> None:
    """GPT-2/3 initialisation of a GPT or any part of one (a pipeline stage), by parameter name:
    N(0, 0.02), residual projections scaled by 1/sqrt(2L), LayerNorms 1 and biases 0. Sharded
    (DTensor) parameters work too: torch.nn.init draws each rank's shard."""
    residual_std = 0.02 / math.sqrt(2 * n_layer)
    for name, p in module.named_parameters():
        if p.dim() == 1:
            nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
        elif name.endswith(("proj.weight", "down.weight")):
            nn.init.normal_(p, std=residual_std)
        else:
            nn.init.normal_(p, std=0.02)


def init_built_on_meta(module: nn.Module, n_layer: int) -> None:
    """The weights of a GPT (or part of one) built on the meta device, drawn as GPT(shape) draws
    them: every layer's default initialisation first, in construction order (so the random stream
    advances as it does inside GPT.__init__), then init_weights. A whole model so gets the very
    weights GPT(shape) gets from the same seed; a sharded one draws each rank's shards, the same
    for the same seed and layout."""
    for part in module.modules():
        if not isinstance(part, GPT) and hasattr(part, "reset_parameters"):
            part.reset_parameters()
    init_weights(module, n_layer)
