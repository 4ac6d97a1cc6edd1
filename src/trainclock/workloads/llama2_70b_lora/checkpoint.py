"""Start weights from a local file, never downloaded: the full size reads MLCommons' fused-qkv
Llama 2 70B checkpoint (a Hugging Face folder of *.safetensors, "Llama2-70b-fused-qkv-mlperf"), a CPU
tier the base model `trainclock data prepare` pretrained. Tensor names are Hugging Face's, so the
adapted layers' `...qkv_proj.weight` land in `...qkv_proj.base_layer.weight` (lora.py)."""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from trainclock.errors import DataError, UsageError


def checkpoint_files(path: str | Path) -> list[Path]:
    """The .safetensors files of a checkpoint: the file itself, or every one in the folder."""
    path = Path(path).expanduser()
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path] if path.is_file() else []
    if not files:
        raise UsageError(f"no Llama 2 checkpoint at {path}: pass --checkpoint with the folder of *.safetensors "
                         "(MLCommons' Llama2-70b-fused-qkv-mlperf, downloaded as its README says)")
    return files


def load_base_weights(model: nn.Module, path: str | Path) -> None:
    """Every base weight of `model` from the checkpoint (adapters keep their own initialisation).
    A model on the meta device takes the file's tensors as they are (assign), the only copy made."""
    wanted = {_checkpoint_name(name): name for name, _ in model.named_parameters() if ".lora_" not in name}
    state = {}
    for file in checkpoint_files(path):
        try:
            tensors = load_file(str(file))
        except (SafetensorError, OSError) as e:
            raise DataError(f"cannot read checkpoint file {file} ({e}); download it again") from None
        state.update({wanted[k]: v for k, v in tensors.items() if k in wanted})
    missing = sorted(set(wanted.values()) - set(state))
    if missing:
        raise DataError(f"checkpoint {path} lacks {len(missing)} of the model's tensors (first: "
                        f"{_checkpoint_name(missing[0])}); is it the fused-qkv checkpoint of this model's size?")
    for name, tensor in state.items():
        have = model.get_parameter(name)
        if tensor.shape != have.shape:
            raise DataError(f"checkpoint {path}: {_checkpoint_name(name)} has shape {tuple(tensor.shape)}, "
                            f"the model {tuple(have.shape)}; is it the checkpoint of this model's size?")
    on_meta = any(p.is_meta for p in model.parameters())
    model.load_state_dict(state, strict=False, assign=on_meta)


def save_base_weights(model: nn.Module, path: Path) -> None:
    """The model's weights (no adapters yet) as one safetensors file under Hugging Face's names."""
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))


def _checkpoint_name(name: str) -> str:
    return name.replace(".base_layer.", ".")
