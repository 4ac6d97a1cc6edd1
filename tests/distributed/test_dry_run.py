"""The dry run (one process as rank 0 of a whole job on the fake process-group backend), the meta
build it rests on, and FSDP2's mixed precision. Each full config is measured at its published
layout: gpt3-175b at NVIDIA and CoreWeave's 3,584 H100s (448 nodes x 8: tp 4, pp 8, dp 112, batch
2,688 as their v3.0 log has it), the others on one 8-GPU node as the published 8-GPU entries ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from trainclock import cli
from trainclock.distributed import dry_run
from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import Materialize, ModelParallelism, parallelize

GPT3_3584 = ["--nnodes", "448", "--nproc-per-node", "8", "--tp", "4", "--pp", "8", "--fsdp", "--gbs", "2688"]


def dry(capsys, member: str, *flags: str) -> tuple[int, str, str]:
    code = cli.main(["run", member, "--dry-run", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_gpt3_175b_fits_on_3584_h100s_with_activation_checkpointing(capsys):
    code, out, err = dry(capsys, "gpt3-175b", *GPT3_3584, "--activation-checkpointing")
    assert code == 0, out + err
    assert "rank 0 of 3,584 processes (448 nodes x 8): dp=112 (fsdp) tp=4 pp=8 (1f1b), bf16" in out
    assert "fits: yes" in out
    # rank 0 holds 1/112 of its pipeline stage's quarter of 12 layers plus the embeddings: 54M fp32 parameters
    parameters = float(next(line for line in out.splitlines() if line.startswith("parameters")).split()[-2])
    assert 0.2 < parameters < 0.25


def test_gpt3_175b_does_not_fit_without_activation_checkpointing(capsys):
    """A finding, not a skip: trainclock has no sequence parallelism or selective recomputation,
    so each of the 8 micro-batches 1F1B keeps in flight on the first stage holds its 12 layers'
    whole activations (about 12.7 GB at micro-batch 3): 100+ GB, beyond an 80 GB H100."""
    code, out, _ = dry(capsys, "gpt3-175b", *GPT3_3584)
    assert code == 1
    assert "fits: no" in out and "the largest share is activations (8 micro-batches in flight)" in out


# Dell's XE9680 (8 H100) v3.1 entries' per-GPU batches (shared/mlperf-suite); bert and resnet at the
# nearest global batch the rules give hyperparameters for (768 and 3,200 are not RCP batches)
PUBLISHED_8_GPU = {
    "bert": ["--gbs", "1536", "--micro-batch", "48"],  # 48 per GPU
    "resnet": ["--gbs", "3264", "--micro-batch", "408"],  # 400 per GPU
    "ssd": ["--gbs", "256", "--micro-batch", "32"],
    "maskrcnn": ["--gbs", "96", "--micro-batch", "12"],
    "unet3d": ["--gbs", "56", "--micro-batch", "7"],
    "dlrm_dcnv2": ["--gbs", "55296", "--micro-batch", "6912"],
    "rnnt": ["--gbs", "1536", "--micro-batch", "192"],  # NVIDIA's and Dell's v3.1: 192 per GPU
}
SD_PUBLISHED_8_GPU = ["--gbs", "512", "--micro-batch", "64"]  # Dell's v3.1 stable_diffusion: 64 per GPU


@pytest.mark.parametrize("member", sorted(PUBLISHED_8_GPU))
def test_full_configs_fit_on_one_8_gpu_node(capsys, member):
    code, out, err = dry(capsys, member, "--nproc-per-node", "8", *PUBLISHED_8_GPU[member])
    assert code == 0, out + err
    assert "rank 0 of 8 processes: dp=8 (ddp)" in out and "fits: yes" in out


def test_dlrm_table_wise_puts_the_largest_table_on_rank_0_and_the_planner_splits_it(capsys):
    """A finding: whole tables per rank cannot balance below the largest table (about 40M rows of
    128: 20.5 GB of fp32 weights, as much again in Adagrad state), which rank 0 holds; the default
    plan ("auto") splits the five 40M tables row-wise, keeps the others whole and copies the tiny
    ones: rank 0 holds 28M rows (14.4 GB), row-wise sharding of every table 1/8 of all (13 GB).
    The dry run counts each table's gradient at full size (it makes dense zero gradients where the
    forward cannot run on fake tensors); the sparse ones hold a step's looked-up rows only."""
    def row(out: str, label: str) -> float:
        return float(next(line for line in out.splitlines() if line.startswith(label)).split()[-2])

    flags = ("--nproc-per-node", "8", *PUBLISHED_8_GPU["dlrm_dcnv2"])
    _, table_wise, _ = dry(capsys, "dlrm_dcnv2", *flags, "--embedding-sharding", "table")
    code, planned, err = dry(capsys, "dlrm_dcnv2", *flags)
    _, row_wise, _ = dry(capsys, "dlrm_dcnv2", *flags, "--embedding-sharding", "row")
    assert code == 0 and "fits: yes" in planned, planned + err
    assert row(table_wise, "parameters") > 20 and 13 < row(row_wise, "parameters") < 13.5
    assert 14 < row(planned, "parameters") < 14.6 and row(planned, "total") < 45


def test_rnnt_measures_its_transducer_loss_on_fake_tensors(capsys):
    """The 49M-parameter network holds its fp32 weights and, as buffers, their moving average (8
    bytes a parameter: 0.39 GB); LAMB's state its two moments (0.39 GB); the loss reads only shapes,
    so activations are measured."""
    code, out, err = dry(capsys, "rnnt", "--nproc-per-node", "8", *PUBLISHED_8_GPU["rnnt"])
    assert code == 0, out + err
    assert "activations from the planner" not in out

    def measured(label: str) -> float:
        return float(next(line for line in out.splitlines() if line.startswith(label)).split()[-2])

    assert 0.37 < measured("parameters") < 0.41 and 0.37 < measured("optimizer state") < 0.41


def test_stable_diffusion_at_64_per_gpu_does_not_fit_in_the_dry_run(capsys):
    """A finding, not a skip: at Dell's 64 images per GPU diffusers' eager SD2 UNet keeps about 62 GB
    of activations (nearly all bf16 under autocast: each GroupNorm's, SiLU's and convolution's input
    apart, where NVIDIA's NeMo entry fuses GroupNorm with SiLU; trainclock recomputes no UNet
    blocks), beyond 72 GB usable beside the weights and AdamW state. The frozen text encoder
    (340M) is in the parameters but has no gradients or AdamW state: those are the UNet's 865.9M
    parameters alone (3.46 GB fp32 gradients, twice that in moments). At micro-batch 32, 2 per step,
    it fits (about 32 GB of activations, 48 GB in all)."""
    code, out, err = dry(capsys, "stable_diffusion", "--nproc-per-node", "8", *SD_PUBLISHED_8_GPU)
    assert code == 1, out + err
    assert "rank 0 of 8 processes: dp=8 (ddp)" in out
    assert "fits: no" in out and "the largest share is activations" in out

    def row(label: str) -> float:
        return float(next(line for line in out.splitlines() if line.startswith(label)).split()[-2])

    assert 4.8 < row("parameters") < 4.9  # UNet 3.46 GB + text encoder 1.36 GB, fp32
    assert 3.4 < row("gradients") < 3.5 and 6.9 < row("optimizer state") < 7.0


def test_a_benchmark_without_the_model_hook_says_so_in_one_line(capsys, monkeypatch):
    from trainclock.workloads.rnnt.workload import RnntWorkload

    monkeypatch.delattr(RnntWorkload, "sample_loss")
    code, out, err = dry(capsys, "rnnt", "--nproc-per-node", "8")
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "has no dry run yet" in err and "sample_loss" in err


@pytest.mark.parametrize("flags, message", [
    (["--nnodes", "448", "--nproc-per-node", "8", "--tp", "3"], "cannot be split into tp=3"),
    (["--nnodes", "448", "--nproc-per-node", "8", "--tp", "4", "--pp", "8", "--fsdp"], "cannot be split evenly over 112"),
    (["--nproc-per-node", "8", "--tp", "8", "--pp", "32"], "cannot be split into tp=8 x pp=32"),
    (["--nproc-per-node", "8", "--tp", "8", "--resume"], "drop --resume"),
    (["--nproc-per-node", "8", "--accelerator", "no-such-gpu"], "unknown accelerator"),
])
def test_bad_layouts_are_refused_in_one_line(capsys, flags, message):
    code, out, err = dry(capsys, "gpt3-175b", *flags)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("member", ["gpt3-tiny", "gpt3-mini"])
def test_meta_build_then_materialise_gives_the_eager_weights(member):
    from trainclock.workloads.gpt3.spec import get_member
    from trainclock.workloads.gpt3.workload import build_model

    spec = get_member(member)
    torch.manual_seed(11)
    eager = build_model(spec, single_process(), torch.device("cpu"), on_meta=False).state_dict()
    after_eager = torch.get_rng_state()
    torch.manual_seed(11)
    meta = build_model(spec, single_process(), torch.device("cpu"), on_meta=True).state_dict()
    assert eager.keys() == meta.keys()
    assert all(torch.equal(eager[k], meta[k]) for k in eager)
    assert torch.equal(torch.get_rng_state(), after_eager)  # what is drawn next is drawn alike too


class TwoLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.parametrize("precision, gathered", [("bf16", torch.bfloat16), ("fp32", torch.float32)])
def test_fsdp_gathers_parameters_in_the_runs_precision(precision, gathered):
    """A bf16 run's FSDP2 units all-gather bf16 parameters and reduce fp32 gradients; an fp32 run
    gathers fp32. Seen inside forward, on 2 fake data-parallel ranks."""
    seen: list[torch.dtype] = []
    with dry_run.fake_job(Layout(dp=2, fsdp=True, precision=precision)) as ctx:
        with torch.device("meta"):
            model = TwoLinears()
        model = parallelize(model, ctx, ModelParallelism(blocks=lambda m: list(m.blocks)),
                            materialize=Materialize(torch.device("meta")))
        policy = model.blocks[0]._get_fsdp_state()._mp_policy
        assert policy.param_dtype == (torch.bfloat16 if precision == "bf16" else None)
        assert policy.reduce_dtype == (torch.float32 if precision == "bf16" else None)
        model.blocks[0].register_forward_pre_hook(lambda module, args: seen.append(module.weight.dtype))
        with dry_run.fake_tensor_mode():
            model(torch.randn(4, 16)).sum().backward()
        assert [p.dtype for p in model.parameters()] == [torch.float32] * 4  # the shards the optimizer updates
        assert [p.grad.dtype for p in model.parameters()] == [torch.float32] * 4
    assert seen == [gathered]


def test_the_layout_carries_the_precision_and_describes_itself_as_before():
    """execute resolves the precision after the context exists and puts it in the context's
    layout, where parallelize's FSDP2 units read it; logs and checkpoints describe layouts as before."""
    layout = replace(Layout(dp=2, fsdp=True), precision="bf16")
    assert layout.precision == "bf16" and Layout().precision == "fp32"
    assert layout.describe() == Layout(dp=2, fsdp=True).describe()


@pytest.mark.parametrize("layout, microbatches, in_flight", [
    (Layout(), 24, 1),
    (Layout(pp=8), 24, 8),
    (Layout(pp=8), 4, 4),
    (Layout(pp=8, pp_schedule="gpipe"), 24, 24),
    (Layout(pp=8, pp_schedule="interleaved-1f1b", vp=12), 24, 9),  # 8 x (1 + 7/96), rounded up
])
def test_micro_batches_in_flight(layout, microbatches, in_flight):
    assert dry_run.micro_batches_in_flight(layout, microbatches) == in_flight


def test_a_meta_build_without_its_initialisation_is_refused_on_a_real_device():
    with torch.device("meta"):
        model = nn.Linear(4, 4)
    with pytest.raises(ValueError, match="needs its workload's initialisation"):
        parallelize(model, single_process(), ModelParallelism(), materialize=Materialize(torch.device("cpu")))
    initialised = parallelize(model, single_process(), ModelParallelism(),
                              materialize=Materialize(torch.device("cpu"), zeros))
    assert initialised.weight.device.type == "cpu" and not initialised.weight.any()


def zeros(module: nn.Module) -> None:
    for p in module.parameters():
        nn.init.zeros_(p)


@pytest.mark.parametrize("kind", ["pp", "tp", "fsdp"])
def test_a_meta_build_trains_on_real_processes(kind):
    """2 gloo processes build gpt3-tiny on the meta device, materialise their shards, and train a
    step: the weights are drawn (finite), and the pipeline's last stage got the embedding's values
    for its tied head."""
    worker = Path(__file__).with_name("meta_build_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(worker), kind], capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(rank["finite"] for rank in ranks)
    if kind == "pp":
        assert all(rank["head equals embedding"] for rank in ranks)
    losses = {rank["loss"] for rank in ranks}
    assert len(losses) == 1 and 5 < losses.pop() < 8  # both ranks see one loss, near ln(1024)
