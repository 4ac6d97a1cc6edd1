"""GPT-3 training steps on one GPU: tokens/s and MFU of gpt3-125m and gpt3-1.3b in bf16, eager and
compiled, against the GPU's bf16 matmul peak measured in the same run (and the datasheet's).

The model is trainclock's own (workloads/gpt3/model.py, loaded alone: the device machine has PyTorch
but not trainclock's other dependencies); the step is the one train.step.train_step runs for GPT-3
(bf16 autocast over fp32 weights, backward, clip at 1.0, fused AdamW), on random tokens, which cost
the same as real ones. FLOPs per token are 6N + 12*L*D*T with the real vocabulary (50,257), also
where the variant pads the embedding to a multiple of 64 for the matmul kernels. Not a test.

  python benchmarks/gpt3_gpu.py [--steps 10] [--variants 125m:eager:32,1.3b:compiled:16] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parents[1] / "src"


def _load(name: str, relative: str):
    spec = importlib.util.spec_from_file_location(name, SRC / relative)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


model_code = _load("gpt3_model", "trainclock/workloads/gpt3/model.py")
peak_code = _load("device_peak", "trainclock/device/peak.py")

VOCAB = 50257  # GPT-2's BPE, as the gpt3 members use
SHAPES = {  # the GPT-3 paper's table 2.1 (1.3B with 16 heads of 128, as workloads/gpt3/spec.py explains)
    "125m": model_code.GPTShape(n_layer=12, d_model=768, n_head=12, context=2048, vocab_size=VOCAB),
    "1.3b": model_code.GPTShape(n_layer=24, d_model=2048, n_head=16, context=2048, vocab_size=VOCAB),
}
DATASHEET_BF16 = 989e12  # H100/H200 SXM dense bf16, NVIDIA's datasheet
DEFAULT_VARIANTS = "125m:eager:32,125m:compiled:32,1.3b:eager:16,1.3b:compiled:16,1.3b:compiled-pad:16"


def measure(size: str, mode: str, micro_batch: int, steps: int, device: torch.device) -> dict:
    shape = SHAPES[size]
    padded = mode.endswith("-pad")
    built = model_code.GPTShape(shape.n_layer, shape.d_model, shape.n_head, shape.context,
                                -(-VOCAB // 64) * 64 if padded else VOCAB)
    torch.manual_seed(0)
    model = model_code.GPT(built).to(device)
    runnable = torch.compile(model) if mode.startswith("compiled") else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    tokens = torch.randint(0, VOCAB, (micro_batch, shape.context + 1), device=device)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = runnable(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(3):  # warm-up: compilation, autotuning, the allocator's first blocks
        step()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    tokens_per_s = steps * micro_batch * shape.context / seconds
    result = {"model": f"gpt3-{size}", "mode": mode, "micro_batch": micro_batch, "tokens_per_s": tokens_per_s,
              "tflops": tokens_per_s * shape.flops_per_token() / 1e12, "step_s": seconds / steps,
              "warmup_s": warmup_s, "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30}
    del model, runnable, optimizer
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help="size:mode:micro-batch,... (mode eager, compiled, compiled-pad)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpt3_gpu.py: no CUDA device here; run it on a GPU machine")
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True  # only the fp32 parts outside autocast; bf16 matmuls are unaffected
    peak = peak_code.matmul_peak_flops(device, torch.bfloat16, size=8192, seconds=2.0)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: bf16 matmul peak measured "
          f"{peak / 1e12:,.0f} TFLOP/s (8192^3), datasheet {DATASHEET_BF16 / 1e12:,.0f}", flush=True)
    print(f"{'model':<10} {'mode':<13} {'batch':>5} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'MFU(sheet)':>10} "
          f"{'step s':>7} {'warm-up s':>9} {'GiB':>6}", flush=True)
    results = []
    for variant in args.variants.split(","):
        size, mode, micro_batch = variant.split(":")
        r = measure(size, mode, int(micro_batch), args.steps, device)
        r["mfu"], r["mfu_datasheet"] = r["tflops"] * 1e12 / peak, r["tflops"] * 1e12 / DATASHEET_BF16
        results.append(r)
        print(f"{r['model']:<10} {mode:<13} {r['micro_batch']:>5} {r['tokens_per_s']:>10,.0f} {r['tflops']:>8,.1f} "
              f"{r['mfu']:>6.1%} {r['mfu_datasheet']:>10.1%} {r['step_s']:>7.3f} {r['warmup_s']:>9.1f} "
              f"{r['peak_memory_gib']:>6.1f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "peak_tflops": peak / 1e12, "results": results}, indent=1))


if __name__ == "__main__":
    main()
