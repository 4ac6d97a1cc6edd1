"""The full-size model is Llama 2 70B with the reference's adapters (counted on the meta device), and
the small pieces behave as the reference's: LoRA starts from the base model exactly, trains only the
adapters, attention is causal with grouped key/value heads."""

from __future__ import annotations

import pytest
import torch

from trainclock.workloads.llama2_70b_lora.lora import LoraLinear, add_lora, trainable_parameter_count
from trainclock.workloads.llama2_70b_lora.model import IGNORE, Llama, LlamaShape
from trainclock.workloads.llama2_70b_lora.spec import REFERENCE_LORA, get_member

SMALL = LlamaShape(n_layer=2, d_model=32, n_head=4, n_kv_head=2, d_ffn=48, vocab_size=50, context=16)


def test_full_size_is_llama2_70b_with_the_reference_adapters():
    spec = get_member("llama2_70b_lora-70b")
    with torch.device("meta"):
        model = Llama(spec.shape)
    base = sum(p.numel() for p in model.parameters())
    assert base == spec.shape.parameter_count() == 68_976_648_192  # Hugging Face's Llama-2-70b-hf count
    adapted = add_lora(model, spec.lora)
    assert len(adapted) == 160 and adapted[0] == "model.layers.0.self_attn.qkv_proj"
    # r x (in + out): qkv_proj 8192 -> 10240 (64 query + 2 x 8 key/value heads of 128), o_proj 8192 -> 8192
    assert trainable_parameter_count(model) == spec.trainable_parameter_count() == 80 * 16 * (18432 + 16384) == 44_564_480
    assert (spec.lora.rank, spec.lora.alpha, spec.lora.dropout) == (16, 32, 0.1)
    assert spec.shape.qkv_width == 10240 and spec.seq_len == 8192


def test_lora_starts_from_the_base_model_and_trains_only_the_adapters():
    torch.manual_seed(0)
    model = Llama(SMALL)
    model.init_weights()
    x = torch.randint(0, 50, (2, 16))
    before = model.logits(x)
    add_lora(model, REFERENCE_LORA)
    model.eval()
    assert torch.equal(model.logits(x), before)  # B is zero: the update starts at nothing
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)
    model.train()
    model(x, x).backward()
    assert all(p.grad is None for n, p in model.named_parameters() if n not in trained)
    layer = model.layers[0].self_attn.qkv_proj
    assert isinstance(layer, LoraLinear) and layer.scaling == 2.0  # alpha 32 / r 16


def test_attention_is_causal_and_the_loss_skips_ignored_labels():
    torch.manual_seed(0)
    model = Llama(SMALL)
    model.init_weights()
    x = torch.randint(0, 50, (1, 16))
    changed = x.clone()
    changed[0, 10] = (x[0, 10] + 1) % 50
    a, b = model.logits(x), model.logits(changed)
    assert torch.allclose(a[0, :10], b[0, :10]) and not torch.allclose(a[0, 10:], b[0, 10:])
    labels = torch.full_like(x, IGNORE)
    labels[0, 3] = 7
    expected = torch.nn.functional.cross_entropy(a[0, 3:4], torch.tensor([7]))
    assert model(x, labels).item() == pytest.approx(expected.item(), rel=1e-5)
