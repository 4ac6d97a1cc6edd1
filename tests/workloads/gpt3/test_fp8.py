"""GPT-3's --fp8 (workloads/gpt3/fp8.py): torchao's float8 training swaps exactly the transformer
blocks' Linear layers, at full size (on the meta device) and at a CPU size, and nothing a checkpoint
holds; the swapped model trains like the plain one (torch._scaled_mm runs on the CPU in torch 2.14,
so the matmuls torchao sends to the GPU's FP8 tensor cores are checked here for what they compute);
a device without FP8 matmuls is one line of refusal."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.util
import subprocess
import sys

import pytest
import torch
from torch import nn

from tests.workloads.helpers import ROOT, environment
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.workload.base import RunSettings
from trainclock.workloads.gpt3 import fp8
from trainclock.workloads.gpt3 import workload as gpt3_workload
from trainclock.workloads.gpt3.model import GPT, GPTShape
from trainclock.workloads.gpt3.spec import get_member

LINEARS_PER_BLOCK = 4  # qkv, attention output, MLP up, MLP down
SIZES = ["gpt3-175b", "gpt3-tiny"]


@pytest.fixture(autouse=True)
def inductor_config():
    """convert() sets an inductor flag for compiled rowwise casts: the tests after these see it as it was."""
    import torch._inductor.config as inductor

    with inductor.patch(emulate_precision_casts=inductor.emulate_precision_casts):
        yield


def float8_linear() -> type:
    pytest.importorskip("torchao.float8", reason="torchao is not installed: pip install 'trainclock[fp8]'")
    from torchao.float8.float8_linear import Float8Linear

    return Float8Linear


def build(shape: GPTShape, device: str) -> GPT:
    torch.manual_seed(0)
    with torch.device(device):
        return GPT(shape)


def state(model: nn.Module) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    return {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("member", SIZES)
def test_exactly_the_blocks_linear_layers_become_float8(member):
    Float8Linear = float8_linear()
    shape = get_member(member).shape
    model = build(shape, "meta" if member == "gpt3-175b" else "cpu")  # 175B on meta: no memory
    linears = [name for name, m in model.named_modules() if type(m) is nn.Linear]
    tied = model.tok_emb.weight
    swapped = fp8.convert(model)
    converted = {name for name, m in model.named_modules() if isinstance(m, Float8Linear)}
    assert swapped == len(converted) == LINEARS_PER_BLOCK * shape.n_layer == len(linears)
    assert converted == set(linears) and all(name.startswith("blocks.") for name in converted)
    assert not [name for name, m in model.named_modules() if type(m) is nn.Linear]  # none skipped: dims of 16s
    # the tied embedding and output head stay an Embedding read by F.linear, the same parameter
    assert type(model.tok_emb) is nn.Embedding and type(model.pos_emb) is nn.Embedding
    assert model.tok_emb.weight is tied
    assert all(type(m) is nn.LayerNorm for name, m in model.named_modules() if "ln" in name.rsplit(".", 1)[-1])


def test_layers_whose_dims_are_not_multiples_of_16_are_skipped():
    Float8Linear = float8_linear()
    odd = GPTShape(n_layer=2, d_model=72, n_head=4, context=32, vocab_size=256)  # 72 = 4 x 16 + 8
    model = build(odd, "cpu")
    assert fp8.convert(model) == 0
    assert not any(isinstance(m, Float8Linear) for m in model.modules())
    assert sum(type(m) is nn.Linear for m in model.modules()) == LINEARS_PER_BLOCK * odd.n_layer
    assert fp8.converts(nn.Linear(32, 48), "blocks.0.mlp.up")
    assert not fp8.converts(nn.Linear(32, 40), "blocks.0.mlp.up")
    assert not fp8.converts(nn.Linear(32, 32), "head")  # outside the blocks


@pytest.mark.parametrize("member", SIZES)
def test_parameters_and_state_dict_keys_are_unchanged(member):
    float8_linear()
    shape = get_member(member).shape
    device = "meta" if member == "gpt3-175b" else "cpu"
    model = build(shape, device)
    before = state(model)
    fp8.convert(model)
    assert state(model) == before  # same names, shapes and dtypes: no buffers, no wrapped weights
    assert sum(p.numel() for p in model.parameters()) == shape.parameter_count()
    if device == "cpu":  # a checkpoint of either loads into the other, strictly
        plain = build(shape, "cpu")
        model.load_state_dict(plain.state_dict(), strict=True)
        plain.load_state_dict(model.state_dict(), strict=True)


TINY = GPTShape(n_layer=2, d_model=128, n_head=4, context=64, vocab_size=512)


def test_a_converted_tiny_model_trains_like_the_plain_one():
    float8_linear()
    plain = build(TINY, "cpu")
    converted = copy.deepcopy(plain)
    # emulated: torchao's rowwise casts, matmuls of the float8 values in fp32 (torch._scaled_mm's CPU
    # backward is a reference loop here, 20 s a step at this size)
    fp8.convert(converted, emulate=True)
    starts = torch.randint(0, TINY.vocab_size, (8, 8, 1), generator=torch.Generator().manual_seed(1))
    batches = (starts + 3 * torch.arange(TINY.context + 1)) % TINY.vocab_size  # learnable: every third token
    curves = []
    for model in (plain, converted):
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        losses = []
        for tokens in batches:
            loss = model(tokens[:, :-1], tokens[:, 1:])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        curves.append(losses)
    reference, float8 = curves
    assert reference[-1] < reference[0] - 0.5  # it learns, so the comparison says something
    assert all(abs(b - a) / a < 0.03 for a, b in zip(reference, float8)), (reference, float8)


def test_the_float8_matmuls_a_gpu_runs_give_the_plain_loss():
    float8_linear()
    plain = build(TINY, "cpu")
    converted = copy.deepcopy(plain)
    fp8.convert(converted)  # not emulated: torch._scaled_mm with rowwise scales, as on the GPU
    tokens = torch.randint(0, TINY.vocab_size, (8, TINY.context + 1), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        a, b = plain(tokens[:, :-1], tokens[:, 1:]).item(), converted(tokens[:, :-1], tokens[:, 1:]).item()
    assert abs(b - a) / a < 0.01


@pytest.mark.parametrize("on_meta", [False, True])
def test_the_workloads_model_has_float8_blocks_and_the_same_initial_weights(monkeypatch, on_meta):
    Float8Linear = float8_linear()
    monkeypatch.setattr(gpt3_workload, "check_fp8", lambda device: None)  # a CPU stands in for the GPU
    spec = get_member("gpt3-tiny")
    models = []
    for with_fp8 in (False, True):
        torch.manual_seed(3)
        models.append(gpt3_workload.build_model(dataclasses.replace(spec, fp8=with_fp8), single_process(),
                                                torch.device("cpu"), on_meta=on_meta))
    plain, converted = models
    assert sum(isinstance(m, Float8Linear) for m in converted.modules()) == LINEARS_PER_BLOCK * spec.shape.n_layer
    assert not any(isinstance(m, Float8Linear) for m in plain.modules())
    theirs = plain.state_dict()
    assert all(torch.equal(v, theirs[k]) for k, v in converted.state_dict().items())


def test_resolve_records_fp8_in_the_spec_and_the_log():
    float8_linear()
    workload = gpt3_workload.GPT3Workload()
    assert not workload.resolve("gpt3-tiny", RunSettings(extra={"fp8": False}), Layout(), torch.device("meta")).fp8
    spec = workload.resolve("gpt3-tiny", RunSettings(extra={"fp8": True}), Layout(), torch.device("meta"))
    assert spec.fp8 and spec.with_batch(64).fp8  # a dry run (meta) sizes an fp8 model
    assert gpt3_workload.log_keys(spec, "c4")["trainclock_fp8"] == f"torchao float8 {fp8.RECIPE}"
    assert "trainclock_fp8" not in gpt3_workload.log_keys(get_member("gpt3-tiny"), "c4")  # bf16 logs as before


def test_resolve_refuses_fp8_on_a_cpu():
    with pytest.raises(UsageError, match=r"^--fp8 needs .*compute capability 8\.9.*this run is on cpu"):
        gpt3_workload.GPT3Workload().resolve("gpt3-tiny", RunSettings(extra={"fp8": True}), Layout(),
                                             torch.device("cpu"))


def test_fp8_without_torchao_says_how_to_install_it(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else find_spec(name, *a))
    with pytest.raises(UsageError, match=r"^--fp8 needs torchao.*pip install 'trainclock\[fp8\]'$"):
        fp8.check(torch.device("meta"))


@pytest.mark.parametrize(("capability", "refused"), [((8, 0), True), ((8, 6), True), ((8, 9), False), ((9, 0), False)])
def test_a_gpu_without_fp8_tensor_cores_is_refused(monkeypatch, capability, refused):
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    if not refused:
        fp8.check_device(torch.device("cuda"))
        return
    with pytest.raises(UsageError) as e:
        fp8.check_device(torch.device("cuda"))
    assert f"has compute capability {capability[0]}.{capability[1]}" in str(e.value) and "\n" not in str(e.value)


def test_fp8_on_a_cpu_is_one_line_and_no_result(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "trainclock.cli", "run", "gpt3-tiny", "--fp8", "--device", "cpu",
                           "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=300,
                          env=environment(), cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("trainclock: error: --fp8 needs an NVIDIA GPU of compute capability 8.9"), line
    assert "drop --fp8 to train in bf16" in line
    assert not list(out.rglob("result_*"))


def test_the_flag_is_the_benchmarks_own_and_off_by_default():
    parser = argparse.ArgumentParser()
    gpt3_workload.GPT3Workload().add_arguments(parser.add_argument_group())
    assert parser.parse_args([]).fp8 is False and parser.parse_args(["--fp8"]).fp8 is True


def test_the_step_time_script_times_an_fp8_row_with_the_flag_on():
    spec = importlib.util.spec_from_file_location("mlperf_steps_gpu", ROOT / "benchmarks" / "mlperf_steps_gpu.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules["mlperf_steps_gpu"] = script  # dataclasses look their module up
    spec.loader.exec_module(script)
    workload = gpt3_workload.GPT3Workload()
    assert script.FP8_FLAG in script.workload_flags(workload)
    assert script.default_settings(workload, None).extra[script.FP8_FLAG] is False
    settings = script.default_settings(workload, None, compile=True, on=(script.FP8_FLAG,))
    assert settings.extra[script.FP8_FLAG] is True and settings.compile
