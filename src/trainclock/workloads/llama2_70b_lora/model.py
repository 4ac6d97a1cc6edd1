"""The Llama 2 architecture in one file: decoder-only, pre-RMSNorm, rotary positions (RoPE),
grouped-query attention (GQA: fewer key/value heads than query heads), SwiGLU MLP, untied input
and output embeddings, causal attention through SDPA.

Module names follow Hugging Face's LlamaForCausalLM with MLCommons' fused query/key/value matmul
(`self_attn.qkv_proj`, the "llama-v2-fused-qkv" checkpoint the reference fine-tunes), so that
checkpoint's tensors load by name. Kept free of parallelism, precision and LoRA (lora.py).
Tensor names carry their shape: B batch, T time, D model width, H query heads, G key/value heads,
K head width, F MLP width, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaShape:
    n_layer: int
    d_model: int
    n_head: int
    n_kv_head: int
    d_ffn: int
    vocab_size: int
    context: int
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_head or self.n_head % self.n_kv_head:
            raise ValueError(f"d_model {self.d_model}, {self.n_head} heads and {self.n_kv_head} key/value heads "
                             "must divide one another")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def qkv_width(self) -> int:
        """Output width of the fused q/k/v projection: all query heads, then the key and value heads."""
        return (self.n_head + 2 * self.n_kv_head) * self.head_dim

    def layer_parameter_count(self) -> int:
        d = self.d_model
        attention = d * self.qkv_width + d * d  # qkv_proj and o_proj (Llama has no biases)
        mlp = 3 * d * self.d_ffn  # gate, up and down projections
        return attention + mlp + 2 * d  # two RMSNorm weights

    def parameter_count(self) -> int:
        """Exact count of the model's parameters, computed without building it."""
        embeddings = 2 * self.vocab_size * self.d_model  # input embedding and lm_head, untied
        return self.n_layer * self.layer_parameter_count() + embeddings + self.d_model  # final norm

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token with every weight trained: 6N for the matmuls plus 12*L*D*T for
        attention scores and weighted sum (the nanoGPT/PaLM estimate). LoRA training skips the
        frozen weights' gradient (a third of their work): see spec.LoraSpec.flops_per_token."""
        t = seq_len or self.context
        return 6 * (self.parameter_count() - self.vocab_size * self.d_model) + 12 * self.n_layer * self.d_model * t


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x_BTD: torch.Tensor) -> torch.Tensor:
        # normalised in fp32 as the reference (HF LlamaRMSNorm) does: bf16 squares lose the small values
        x = x_BTD.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(x_BTD.dtype)


def rope_tables(shape: LlamaShape, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every (position, frequency) pair, each (T, K/2)."""
    k = shape.head_dim
    inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, k, 2, device=device, dtype=torch.float32) / k))
    angles = torch.outer(torch.arange(shape.context, device=device, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x_BHTK: torch.Tensor, cos_TK: torch.Tensor, sin_TK: torch.Tensor) -> torch.Tensor:
    """Rotate each (first half, second half) pair of a head's channels by its position's angle
    (HF's rotate_half layout, which the Llama checkpoints' q/k rows are permuted for)."""
    t = x_BHTK.shape[-2]
    cos, sin = cos_TK[:t].to(x_BHTK.dtype), sin_TK[:t].to(x_BHTK.dtype)
    x1, x2 = x_BHTK.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Attention(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.shape = shape
        self.qkv_proj = nn.Linear(shape.d_model, shape.qkv_width, bias=False)
        self.o_proj = nn.Linear(shape.d_model, shape.d_model, bias=False)

    def forward(self, x_BTD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        s = self.shape
        b, t, _ = x_BTD.shape
        q, k, v = self.qkv_proj(x_BTD).split([s.n_head * s.head_dim, s.n_kv_head * s.head_dim,
                                               s.n_kv_head * s.head_dim], dim=-1)
        q_BHTK = apply_rope(q.view(b, t, s.n_head, s.head_dim).transpose(1, 2), cos, sin)
        k_BGTK = apply_rope(k.view(b, t, s.n_kv_head, s.head_dim).transpose(1, 2), cos, sin)
        v_BGTK = v.view(b, t, s.n_kv_head, s.head_dim).transpose(1, 2)
        # GQA: each key/value head serves n_head / n_kv_head query heads (SDPA repeats them)
        y_BHTK = F.scaled_dot_product_attention(q_BHTK, k_BGTK, v_BGTK, is_causal=True,
                                                enable_gqa=s.n_kv_head != s.n_head)
        return self.o_proj(y_BHTK.transpose(1, 2).reshape(b, t, s.d_model))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(shape.d_model, shape.d_ffn, bias=False)
        self.up_proj = nn.Linear(shape.d_model, shape.d_ffn, bias=False)
        self.down_proj = nn.Linear(shape.d_ffn, shape.d_model, bias=False)

    def forward(self, x_BTD: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x_BTD)) * self.up_proj(x_BTD))


class DecoderLayer(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(shape.d_model, shape.norm_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.d_model, shape.norm_eps)
        self.mlp = MLP(shape)

    def forward(self, x_BTD: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x_BTD = x_BTD + self.self_attn(self.input_layernorm(x_BTD), cos, sin)
        return x_BTD + self.mlp(self.post_attention_layernorm(x_BTD))


class LlamaBody(nn.Module):
    """HF's `model.` prefix: embeddings, layers and the final norm."""

    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(shape.vocab_size, shape.d_model)
        self.layers = nn.ModuleList(DecoderLayer(shape) for _ in range(shape.n_layer))
        self.norm = RMSNorm(shape.d_model, shape.norm_eps)


class Llama(nn.Module):
    def __init__(self, shape: LlamaShape) -> None:
        super().__init__()
        self.shape = shape
        self.model = LlamaBody(shape)
        self.lm_head = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        # position tables are derived, not weights: rebuilt on load, never in a checkpoint
        cos, sin = rope_tables(shape)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    @property
    def layers(self) -> nn.ModuleList:
        return self.model.layers

    def init_weights(self) -> None:
        """Llama's initialisation for a model trained from scratch (a CPU tier's pretraining):
        normal(0, 0.02) matrices, unit norm weights; the residual outputs scaled by 1/sqrt(2L)."""
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif "lora_" not in name:
                std = 0.02 / (2 * self.shape.n_layer) ** 0.5 if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(p, std=std)
        cos, sin = rope_tables(self.shape, self.rope_cos.device)
        self.rope_cos.copy_(cos)
        self.rope_sin.copy_(sin)

    def logits(self, idx_BT: torch.Tensor) -> torch.Tensor:
        x_BTD = self.model.embed_tokens(idx_BT)
        for layer in self.model.layers:
            x_BTD = layer(x_BTD, self.rope_cos, self.rope_sin)
        return self.lm_head(self.model.norm(x_BTD))

    def forward(self, idx_BT: torch.Tensor, labels_BT: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy over the labelled positions (label -100: not scored, as the
        reference masks the document and the padding so that only the summary is learned)."""
        return token_losses(self.logits(idx_BT), labels_BT).sum() / (labels_BT != IGNORE).sum().clamp(min=1)


IGNORE = -100  # the label of a position the loss skips (PyTorch's and Hugging Face's convention)


def token_losses(logits_BTV: torch.Tensor, labels_BT: torch.Tensor) -> torch.Tensor:
    """Cross-entropy (nats) of each position's prediction of its label, 0 where the label is IGNORE;
    `labels_BT` are already the next tokens (shifted by the data)."""
    return F.cross_entropy(logits_BTV.float().flatten(0, 1), labels_BT.flatten(), ignore_index=IGNORE,
                           reduction="none").view_as(labels_BT)
