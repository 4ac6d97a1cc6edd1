"""The loop's collectives as NCCL would take them: runs of 2 processes under the strict backend
(tests/distributed/strict_backend.py), which refuses any tensor trainclock hands a collective off
the group's communication device, as NCCL refuses CPU tensors on a GPU node. Before collectives
went through distributed.collectives, every one of these runs died at its first step (the loss
moved to the host for its all-reduce)."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

from tests.distributed.helpers import tiny_args
from tests.workloads.helpers import ROOT, environment, losses, prepare_data, trainclock

STRICT = {"TRAINCLOCK_DIST_PLUGIN": "tests.distributed.strict_backend", "TRAINCLOCK_DIST_BACKEND": "strict"}


def _script(body: str) -> subprocess.CompletedProcess:
    """`body` in each of 2 processes under torchrun, with the strict backend as the default group."""
    code = textwrap.dedent("""
        import torch, torch.distributed as dist
        import tests.distributed.strict_backend
        from trainclock.distributed import collectives
        dist.init_process_group("strict")
    """) + textwrap.dedent(body) + "\ndist.destroy_process_group()\n"
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "--no-python", sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=environment(), cwd=ROOT)


def test_the_backend_refuses_a_host_tensor_and_takes_one_on_the_communication_device():
    """What the runs below rely on: a collective on a CPU tensor from our code fails as under NCCL;
    the same value through collectives.all_reduce (moved to the group's device and back) is summed."""
    refused = _script("dist.all_reduce(torch.ones(1))")
    assert refused.returncode != 0 and "No backend type associated with device type cpu" in refused.stderr
    taken = _script("""
        assert collectives.comm_device().type == "lazy"
        total = collectives.all_reduce(torch.full((2,), float(dist.get_rank() + 1)))
        assert total.device.type == "cpu" and total.tolist() == [3.0, 3.0], total
        flags = collectives.all_gather(torch.tensor([dist.get_rank()]))
        assert [int(f) for f in flags] == [0, 1]
        print("summed")
    """)
    assert taken.returncode == 0 and taken.stdout.count("summed") == 2, taken.stderr[-3000:]


def _trained(proc: subprocess.CompletedProcess, curve: list[float]) -> None:
    assert proc.returncode in (0, 1) and "run " in proc.stdout, proc.stderr[-3000:]
    assert "strict backend" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert curve and all(math.isfinite(x) for x in curve) and curve[-1] < curve[0]


@pytest.mark.slow
@pytest.mark.parametrize("layout", [[], ["--fsdp"], ["--pp", "2"]], ids=["ddp", "fsdp2", "pp2"])
def test_gpt3_trains_under_the_strict_backend(corpus_dir, tmp_path, layout):
    """Losses read at log intervals and evaluations summed over ranks on the communication device,
    the stop flag made there; FSDP2's own collectives and the pipeline's stage-to-stage sends too."""
    proc = trainclock(*tiny_args(corpus_dir, tmp_path, "--nproc", "2", *layout, samples=320), **STRICT)
    _trained(proc, losses(tmp_path, "gpt3-tiny"))


@pytest.mark.slow
@pytest.mark.parametrize("sharding", ["row", "auto"])
def test_dlrm_with_sharded_embeddings_trains_under_the_strict_backend(tmp_path, sharding):
    """The sharded embeddings' id exchanges (row-wise; the planner's mix at this size: table-wise
    tables and replicated ones in DDP) and the gradient norm summed over the tables' group."""
    prepare_data("dlrm-tiny")
    proc = trainclock("run", "dlrm-tiny", "--out", str(tmp_path), "--nproc", "2", "--embedding-sharding", sharding,
                      "--seed", "4", "--max-samples", "6144", "--precision", "fp32", "--no-progress", **STRICT)
    _trained(proc, losses(tmp_path, "dlrm-tiny"))
