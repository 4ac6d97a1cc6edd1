"""FP8 training of GPT's transformer blocks through torchao's float8 training (`--fp8`): each block's
Linear layers (qkv, attention output, MLP up and down) become torchao's Float8Linear, whose three
matmuls (output, input gradient, weight gradient) cast their operands to float8 with dynamic scales
and run on the FP8 tensor cores (torch._scaled_mm), returning the input's precision (bf16 under
autocast). The weights stay the fp32 parameters they were, under the same names: a checkpoint of an
fp8 run loads into a bf16 one.

Recipe: rowwise, torchtitan's default (its Float8LinearConverter, which has offered only the rowwise
recipes since pytorch/torchtitan#3127, April 2026) and the recipe torchao's docs call its stable
float8 training. A scale per row follows
outliers that one scale per tensor flattens, for less speed (torchao's Llama3-8B on 8 H100: +10%
rowwise, +25% tensorwise with float8 all-gather): a time-to-train run must still reach its quality
target, so accuracy comes first. FSDP2's float8 all-gather (enable_fsdp_float8_all_gather) exists
for tensorwise scaling only (torchao refuses it otherwise): with rowwise FSDP2 all-gathers bf16,
as torchtitan does.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import TYPE_CHECKING

import torch
from torch import nn

from trainclock.errors import UsageError

if TYPE_CHECKING:  # torchao is imported only by a run that asks for FP8 (an optional extra)
    from torchao.float8 import Float8LinearConfig

RECIPE = "rowwise"
CUDA_CAPABILITY = (8, 9)  # Ada and Hopper: the first NVIDIA GPUs with FP8 tensor cores
ROCM_CAPABILITY = (9, 4)  # MI300 (gfx942), torchtitan's AMD floor
ALIGNMENT = 16  # torch._scaled_mm needs both dimensions of a weight to be multiples of 16
NEEDS = "an NVIDIA GPU of compute capability 8.9 or newer (L40S, H100, H200, B200) or an AMD MI300"


def check(device: torch.device) -> None:
    """Refuse --fp8, in one line, where no FP8 matmul runs (meta, a dry run, passes) or torchao is missing."""
    if device.type != "meta":
        check_device(device)
    if importlib.util.find_spec("torchao") is None:
        raise UsageError("--fp8 needs torchao, an optional dependency: pip install 'trainclock[fp8]'")


def check_device(device: torch.device) -> None:
    """Refuse --fp8 on a device without FP8 tensor cores: a CPU, a GPU older than Ada/Hopper or MI300."""
    if device.type != "cuda":
        raise UsageError(f"--fp8 needs {NEEDS}; this run is on {device.type}: drop --fp8 to train in bf16")
    need = ROCM_CAPABILITY if torch.version.hip else CUDA_CAPABILITY
    have = torch.cuda.get_device_capability(device)
    if have < need:
        raise UsageError(f"--fp8 needs {NEEDS}; {torch.cuda.get_device_name(device)} has compute capability "
                         f"{have[0]}.{have[1]}: drop --fp8 to train in bf16")


def converts(module: nn.Module, fqn: str) -> bool:
    """torchtitan's module filter for GPT: a block's Linear whose dims are multiples of 16. The tied
    embedding and output head (an Embedding read by F.linear) and the LayerNorms stay as they are."""
    return (isinstance(module, nn.Linear) and fqn.startswith("blocks.")
            and module.in_features % ALIGNMENT == 0 and module.out_features % ALIGNMENT == 0)


def float8_config(emulate: bool = False) -> Float8LinearConfig:
    """torchao's Float8LinearConfig of the recipe; `emulate` runs its matmuls in fp32 (CPU tests)."""
    from torchao.float8 import Float8LinearConfig

    return dataclasses.replace(Float8LinearConfig.from_recipe_name(RECIPE), emulate=emulate)


def convert(model: nn.Module, emulate: bool = False) -> int:
    """Swap the blocks' Linear layers for Float8Linear in place, before tensor parallel, activation
    checkpointing, compile and FSDP2 (torchtitan's order); works on the meta device. The number swapped."""
    from torchao.float8 import convert_to_float8_training

    before = sum(isinstance(m, nn.Linear) and converts(m, name) for name, m in model.named_modules())
    convert_to_float8_training(model, config=float8_config(emulate), module_filter_fn=converts)
    import torch._inductor.config as inductor

    inductor.emulate_precision_casts = True  # torchtitan's fix for compiled rowwise casts (pytorch#150859)
    return before
