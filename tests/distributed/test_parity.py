"""A 2-process run trains the same model as a 1-process run: same global batch, same samples,
same initial weights, so the loss curves match to reduction-order tolerance."""

import pytest

from tests.distributed.helpers import losses, run, tiny_args


@pytest.fixture(scope="module")
def reference(corpus_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("one-process")
    proc = run(tiny_args(corpus_dir, out))
    assert proc.returncode in (0, 1), proc.stderr
    return losses(out)


@pytest.mark.parametrize("layout", [[], ["--fsdp"], ["--tp", "2"], ["--pp", "2"]], ids=["ddp", "fsdp2", "tp2", "pp2"])
def test_two_processes_match_one(reference, corpus_dir, tmp_path, layout):
    proc = run(tiny_args(corpus_dir, tmp_path, "--nproc", "2", *layout))
    assert proc.returncode in (0, 1) and "run " in proc.stdout, proc.stderr[-3000:]
    curve = losses(tmp_path)
    assert len(curve) == len(reference) == 20
    assert curve == pytest.approx(reference, rel=2e-4, abs=2e-4)
    assert curve[-1] < curve[0] - 0.5  # it trained
