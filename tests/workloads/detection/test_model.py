"""The detection models' numerics that a CPU's bf16 kernels can break."""

from __future__ import annotations

import torch

from trainclock.workloads.detection.model import CpuSafeP6P7


def test_retinanet_p6_p7_weight_gradients_are_right_under_a_cpus_bf16_autocast():
    """oneDNN's bf16 weight gradient of a stride-2 3x3 convolution over a 1x1 map is garbage (up
    to 1e17) in most trials: P6 and P7 run in fp32, so their gradients match an fp32 pass."""
    torch.manual_seed(0)
    for _ in range(10):
        block = CpuSafeP6P7(32, 32)
        p5 = torch.randn(16, 32, 1, 1)  # a 64px tier image's P5 map
        with torch.autocast("cpu", dtype=torch.bfloat16):
            levels, names = block([p5], [p5], ["p5"])
        assert names == ["p5", "p6", "p7"] and levels[0] is p5
        sum(level.float().sum() for level in levels[1:]).backward()
        reference = CpuSafeP6P7(32, 32)
        reference.load_state_dict(block.state_dict())
        levels, _ = reference([p5], [p5], ["p5"])
        sum(level.sum() for level in levels[1:]).backward()
        for name, param in block.named_parameters():
            torch.testing.assert_close(param.grad, dict(reference.named_parameters())[name].grad)
