"""Start weights come from a local file under Hugging Face's names (the fused-qkv checkpoint's), into
a model already carrying its adapters; a wrong or missing file is one line."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from trainclock.errors import DataError, UsageError
from trainclock.workloads.llama2_70b_lora.checkpoint import load_base_weights, save_base_weights
from trainclock.workloads.llama2_70b_lora.lora import add_lora
from trainclock.workloads.llama2_70b_lora.model import Llama, LlamaShape
from trainclock.workloads.llama2_70b_lora.spec import REFERENCE_LORA

SHAPE = LlamaShape(n_layer=2, d_model=32, n_head=4, n_kv_head=2, d_ffn=48, vocab_size=50, context=16)


def pretrained(tmp_path):
    torch.manual_seed(0)
    source = Llama(SHAPE)
    source.init_weights()
    save_base_weights(source, tmp_path / "model.safetensors")
    return source


@pytest.mark.parametrize("on_meta", [False, True])
def test_base_weights_load_by_name_into_an_adapted_model(tmp_path, on_meta):
    source = pretrained(tmp_path)
    with torch.device("meta" if on_meta else "cpu"):
        model = Llama(SHAPE)
    add_lora(model, REFERENCE_LORA)
    load_base_weights(model, tmp_path)
    qkv = model.layers[1].self_attn.qkv_proj
    assert torch.equal(qkv.base_layer.weight, source.layers[1].self_attn.qkv_proj.weight)
    assert torch.equal(model.lm_head.weight, source.lm_head.weight)
    assert qkv.lora_A.weight.is_meta == on_meta  # the adapters are the run's, not the file's


def test_a_missing_or_foreign_checkpoint_is_one_line(tmp_path):
    model = Llama(SHAPE)
    with pytest.raises(UsageError, match="no Llama 2 checkpoint at"):
        load_base_weights(model, tmp_path / "absent")
    save_file({"model.embed_tokens.weight": torch.zeros(3, 3)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(DataError, match="lacks .* of the model's tensors"):
        load_base_weights(model, tmp_path)
    pretrained(tmp_path)
    with pytest.raises(DataError, match=r"model.embed_tokens.weight has shape \(3, 3\)"):
        load_base_weights(model, tmp_path)  # other.safetensors sorts after model.safetensors: its tensor wins
    (tmp_path / "other.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(DataError, match="cannot read checkpoint file"):
        load_base_weights(model, tmp_path)
